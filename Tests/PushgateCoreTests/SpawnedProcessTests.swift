import Foundation
import PushgateCore
import Testing

#if canImport(Glibc)
import Glibc

/// `SpawnedProcess`, the tests' way to run programs instead of Foundation's `Process`, whose `run()` dies
/// with SIGSEGV in a process holding more than about 1,300 descriptors (the full parallel test run holds
/// 2,000+).
@Suite("SpawnedProcess: posix_spawn with pipes, environment, directory, signals and exit status")
struct SpawnedProcessTests {
    /// Runs `/bin/sh -c script` to its end; its standard output and error, and its status.
    static func shell(
        _ script: String,
        environment: [String: String]? = nil,
        directory: URL? = nil
    ) throws -> (output: String, status: Int32, reason: SpawnedProcess.TerminationReason) {
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        process.environment = environment
        process.currentDirectoryURL = directory
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        // End of file comes only when the child's copies close: the parent's write end is closed by run().
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(!process.isRunning)
        return (String(decoding: data, as: UTF8.self), process.terminationStatus, process.terminationReason)
    }

    @Test("output and error through one pipe, the exit status, the environment and the directory")
    func basics() throws {
        let result = try Self.shell(
            "echo out; echo err >&2; echo \"$GREETING\"; pwd; exit 3",
            environment: ["GREETING": "hello", "PATH": "/usr/bin:/bin"],
            directory: URL(fileURLWithPath: "/proc")
        )
        #expect(result.output == "out\nerr\nhello\n/proc\n")
        #expect(result.status == 3)
        #expect(result.reason == .exit)
    }

    @Test("with 3,000 descriptors open the spawn works and the child holds only the standard three")
    func manyDescriptors() throws {
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        let wanted = rlim_t(4_096)
        if limit.rlim_cur < wanted, limit.rlim_max >= wanted {
            limit.rlim_cur = wanted
            setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        }
        try #require(limit.rlim_cur >= wanted, "RLIMIT_NOFILE \(limit.rlim_cur) is too low for this test")
        let extra = (0..<3_000).map { _ in open("/dev/null", O_RDONLY) }
        defer { for descriptor in extra where descriptor >= 0 { close(descriptor) } }
        #expect(extra.allSatisfy { $0 >= 0 })
        // The shell lists its own table; the glob holds one descriptor of its own on the directory.
        let result = try Self.shell("cd /proc/$$/fd && echo *")
        #expect(result.status == 0)
        let listed = Set(result.output.split(whereSeparator: \.isWhitespace).compactMap { Int($0) })
        #expect(listed.isSuperset(of: [0, 1, 2]) && listed.count <= 4, "\(result.output.prefix(200))")
    }

    @Test("terminate() ends a child even while this process blocks SIGTERM; the handler sees the signal")
    func terminate() async throws {
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGTERM)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &blocked, &previous)
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sleep")
        process.arguments = ["600"]
        process.standardOutput = FileHandle.nullDevice
        let (ended, continuation) = AsyncStream<Int32>.makeStream()
        process.terminationHandler = { continuation.yield($0.terminationStatus) }
        try process.run()
        pthread_sigmask(SIG_SETMASK, &previous, nil)
        #expect(process.isRunning)
        #expect(process.processIdentifier > 0)
        process.terminate()
        var iterator = ended.makeAsyncIterator()
        #expect(await iterator.next() == SIGTERM)
        #expect(process.terminationReason == .uncaughtSignal)
    }

    @Test("no test starts a program with Foundation's Process (its crash needs only enough descriptors)")
    func noFoundationProcessInTests() throws {
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        let files =
            FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil)?
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" } ?? []
        #expect(files.count > 50, "found the test sources at \(tests.path)")
        let pattern = try Regex(#"(^|[^A-Za-z])Process\(\)"#)
        let offenders = try files.filter { try String(contentsOf: $0, encoding: .utf8).contains(pattern) }
        #expect(offenders.isEmpty, "use SpawnedProcess: \(offenders.map(\.lastPathComponent))")
    }

    @Test("a missing executable is an error from run(), not a child")
    func missingExecutable() {
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: "/nonexistent/program")
        #expect(throws: SpawnedProcess.SpawnError.self) { try process.run() }
        #expect(!process.isRunning)
    }
}
#endif
