import Foundation
import PushgateCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Without `-f` the daemon detaches; the command that started it waits for the daemon's ready line or
/// its error and exits as it did (a start-up error used to exit 78 in the child after the parent had
/// already exited 0).
@Suite("pushgate detached start: the parent tells the truth", .timeLimit(.minutes(3)))
struct DetachedStartTests {
    struct Finished {
        var status: Int32
        var standardError: String
    }

    /// Runs `pushgate ARGUMENTS` (detaching: no `-f`) in `directory` until the starting command exits.
    static func start(_ arguments: [String], in directory: TemporaryDirectory) async throws -> Finished {
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: GatewayCrashTests.gatewayBinary)
        process.arguments = ["-d", directory.path("detached.db"), "-l", "127.0.0.1", "-g", "0", "-n", "0"] + arguments
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PUSHGATE_") }
        process.currentDirectoryURL = directory.url
        let output = OutputCollector()
        let pipe = Pipe()
        process.standardError = pipe
        process.standardOutput = FileHandle.nullDevice
        let ended = AsyncStream<Void>.makeStream()
        pipe.fileHandleForReading.readChunksInBackground({ output.append($0) }, onEnd: { output.end() })
        process.terminationHandler = { _ in ended.continuation.finish() }
        try process.run()
        for await _ in ended.stream {}
        try await eventually("the parent's stderr is read to its end", timeout: .seconds(30)) { output.isComplete }
        return Finished(status: process.terminationStatus, standardError: output.text)
    }

    static func isAlive(_ pid: pid_t) -> Bool { kill(pid, 0) == 0 }

    @Test("a configuration error in the daemon: the starting command exits 78 with the daemon's message")
    func configurationError() async throws {
        let directory = try TemporaryDirectory()
        let finished = try await Self.start(
            ["-o", directory.path("d.log"), "-c", directory.path("missing.crt"), "-k", directory.path("missing.key")],
            in: directory
        )
        #expect(finished.status == 78)
        #expect(finished.standardError.contains("missing.crt"), "\(finished.standardError)")
    }

    @Test("a log file that cannot be opened: exit 78, naming it")
    func unopenableLog() async throws {
        let directory = try TemporaryDirectory()
        let finished = try await Self.start(
            ["--simulator", "-o", directory.path("no/such/folder/d.log")],
            in: directory
        )
        #expect(finished.status == 78)
        #expect(finished.standardError.contains("cannot open the log file"), "\(finished.standardError)")
    }

    @Test("an HTTP port taken by another process: the start fails instead of reporting success")
    func portTaken() async throws {
        let directory = try TemporaryDirectory()
        let holder = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(holder) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(holder, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        #expect(bound == 0)
        #expect(listen(holder, 1) == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(holder, $0, &length) }
        }
        let port = Int(UInt16(bigEndian: address.sin_port))
        let finished = try await Self.start(
            ["--simulator", "-o", directory.path("d.log"), "--http-port", "\(port)"],
            in: directory
        )
        #expect(finished.status != 0, "\(finished.standardError)")
        #expect(!finished.standardError.isEmpty)
    }

    @Test("success is reported only once the daemon is ready; --pid-file names it and is removed at its stop")
    func readyAndPIDFile() async throws {
        let directory = try TemporaryDirectory()
        let log = directory.path("d.log")
        let pidFile = directory.path("d.pid")
        let finished = try await Self.start(
            ["--simulator", "-o", log, "--http-port", "0", "--pid-file", pidFile],
            in: directory
        )
        #expect(finished.status == 0, "\(finished.standardError)")
        // The parent exited only after the daemon was ready: the line is in the log already.
        let text = try String(contentsOfFile: log, encoding: .utf8)
        #expect(text.contains("pushgate ready"))
        let pid = try #require(
            pid_t(try String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .newlines))
        )
        #expect(Self.isAlive(pid))
        kill(pid, SIGTERM)
        try await eventually("the daemon stopped", timeout: .seconds(60)) { !Self.isAlive(pid) }
        #expect(!FileManager.default.fileExists(atPath: pidFile), "the pid file outlived the daemon")
    }

    @Test("--version prints the version and exits 0")
    func version() async throws {
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: GatewayCrashTests.gatewayBinary)
        process.arguments = ["--version"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(String(decoding: data, as: UTF8.self).hasPrefix("pushgate 0."))
    }
}

/// SIGHUP reopens the log file: after logrotate moves it away, the daemon writes a new one.
@Suite("pushgate log file: reopened on SIGHUP, JSON lines", .timeLimit(.minutes(3)))
struct LogReopenTests {
    @Test("moved away and SIGHUP: new lines go to a new file at the path; --log-format json lines all parse")
    func reopenOnSIGHUP() async throws {
        let directory = try TemporaryDirectory()
        let log = directory.path("d.log")
        let pidFile = directory.path("d.pid")
        let finished = try await DetachedStartTests.start(
            ["--simulator", "-o", log, "--http-port", "-1", "--pid-file", pidFile, "--log-format", "json"],
            in: directory
        )
        #expect(finished.status == 0, "\(finished.standardError)")
        let pid = try #require(
            pid_t(try String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .newlines))
        )
        defer { kill(pid, SIGKILL) }
        try FileManager.default.moveItem(atPath: log, toPath: log + ".1")
        kill(pid, SIGHUP)
        try await eventually("the daemon writes a new log file", timeout: .seconds(60)) {
            (try? String(contentsOfFile: log, encoding: .utf8))?.contains("log file reopened") ?? false
        }
        kill(pid, SIGTERM)
        try await eventually("the daemon stopped", timeout: .seconds(60)) { !DetachedStartTests.isAlive(pid) }
        let old = try String(contentsOfFile: log + ".1", encoding: .utf8)
        let new = try String(contentsOfFile: log, encoding: .utf8)
        #expect(old.contains("pushgate ready"))
        #expect(new.contains("pushgate stopped"), "lines after the reopen go to the new file")
        for line in (old + new).split(separator: "\n") {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) is [String: Any], "not JSON: \(line)")
        }
    }
}
