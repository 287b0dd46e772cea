#if canImport(Glibc)
package import Foundation
import Glibc
import Synchronization

/// A child process started with `posix_spawn`, for the tests and tools that run programs: the part of
/// Foundation's `Process` they use (same names, so a call site changes only the type), without its
/// descriptor listing.
///
/// Why not `Process`: on Linux, Foundation 6.3.1's `Process.run` walks `/proc/self/fd` and copies each
/// `dirent` whole, reading up to 256 bytes past the end of glibc's 32 KiB `readdir` buffer. Once a process
/// holds more than about 1,300 descriptors the buffer fills, and when the page after it is unmapped the
/// spawn dies with SIGSEGV. The parallel test run holds 2,000+ (every simulator and client has its own event
/// loop threads, three descriptors each), and two CI runs died that way. Here the child closes what it
/// must not inherit with `posix_spawn_file_actions_addclosefrom_np`, and nothing lists a directory.
package final class SpawnedProcess: @unchecked Sendable {
    // @unchecked: the configuration is set before `run()` by one caller; everything after is under `state`.

    package enum TerminationReason: Sendable { case exit, uncaughtSignal }

    package var executableURL: URL?
    package var arguments: [String]?
    /// nil: the caller's environment.
    package var environment: [String: String]?
    package var currentDirectoryURL: URL?
    /// Each a `Pipe`, a `FileHandle` (`FileHandle.nullDevice` included) or nil to inherit the caller's.
    package var standardInput: Any?
    package var standardOutput: Any?
    package var standardError: Any?
    /// Called once, on the thread that saw the child end.
    package var terminationHandler: (@Sendable (SpawnedProcess) -> Void)?

    private struct State {
        var pid: pid_t = 0
        var status: (reason: TerminationReason, code: Int32)?
    }
    private let state = Mutex(State())
    private let ended = NSCondition()

    package init() {}

    package var processIdentifier: Int32 { state.withLock { $0.pid } }
    package var isRunning: Bool { state.withLock { $0.pid != 0 && $0.status == nil } }
    /// The exit status, or the signal that ended the child; 0 while it runs.
    package var terminationStatus: Int32 { state.withLock { $0.status?.code ?? 0 } }
    package var terminationReason: TerminationReason { state.withLock { $0.status?.reason ?? .exit } }

    package struct SpawnError: Error, CustomStringConvertible {
        package let description: String
    }

    package func run() throws {
        guard let executableURL else { throw SpawnError(description: "no executable") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var parentCloses: [FileHandle] = []
        for (stream, target) in [(standardInput, Int32(0)), (standardOutput, 1), (standardError, 2)] {
            switch stream {
            case let pipe as Pipe:
                let childEnd = target == 0 ? pipe.fileHandleForReading : pipe.fileHandleForWriting
                posix_spawn_file_actions_adddup2(&actions, childEnd.fileDescriptor, target)
                parentCloses.append(childEnd)
            case let handle as FileHandle where handle === FileHandle.nullDevice || handle.fileDescriptor < 0:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            case let handle as FileHandle:
                posix_spawn_file_actions_adddup2(&actions, handle.fileDescriptor, target)
            default:
                break
            }
        }
        if let currentDirectoryURL {
            guard let addChdir = Self.addChdir else { throw SpawnError(description: "no posix_spawn chdir") }
            let added = currentDirectoryURL.path.withCString { addChdir(&actions, $0) }
            guard added == 0 else { throw SpawnError(description: "chdir action: \(added)") }
        }
        SpawnFileActions.closeInheritedDescriptors(&actions)

        // The child starts with no blocked signals and default dispositions: the test process blocks the
        // signals the gateway reads from a signalfd, and a child inheriting that mask would ignore SIGTERM.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM] {
            sigaddset(&defaults, signal)
        }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = [executableURL.path] + (arguments ?? [])
        let environ = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        var pid: pid_t = 0
        let spawned = Self.withCStrings(argv) { argvPointers in
            Self.withCStrings(environ) { environPointers in
                posix_spawn(&pid, executableURL.path, &actions, &attributes, argvPointers, environPointers)
            }
        }
        guard spawned == 0 else {
            throw SpawnError(description: "posix_spawn \(executableURL.path): \(String(cString: strerror(spawned)))")
        }
        for handle in parentCloses { try? handle.close() }
        let child = pid
        state.withLock { $0.pid = child }
        // One thread a child, blocked in waitpid: tests start a few dozen children at most.
        let thread = Thread { [self] in self.reap(child) }
        thread.name = "spawned-\(child)"
        thread.start()
    }

    package func waitUntilExit() {
        ended.lock()
        while state.withLock({ $0.status == nil }) { ended.wait() }
        ended.unlock()
    }

    package func terminate() { signal(SIGTERM) }
    package func interrupt() { signal(SIGINT) }

    private func signal(_ number: Int32) {
        let pid = state.withLock { $0.status == nil ? $0.pid : 0 }
        if pid != 0 { kill(pid, number) }
    }

    private func reap(_ pid: pid_t) {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let signalled = (status & 0x7f) != 0 && (status & 0x7f) != 0x7f
        let result = signalled ? (TerminationReason.uncaughtSignal, status & 0x7f) : (.exit, (status >> 8) & 0xff)
        ended.lock()
        state.withLock { $0.status = result }
        ended.broadcast()
        ended.unlock()
        terminationHandler?(self)
    }

    private typealias AddChdir =
        @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    /// glibc 2.29+, not exported by Swift's Glibc module (it needs _GNU_SOURCE).
    private static let addChdir: AddChdir? = dlsym(nil, "posix_spawn_file_actions_addchdir_np")
        .map { unsafeBitCast($0, to: AddChdir.self) }

    /// A NULL-terminated array of C strings alive for `body`.
    private static func withCStrings<R>(
        _ strings: [String],
        _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R
    ) -> R {
        var pointers = strings.map { strdup($0) }
        pointers.append(nil)
        defer { for pointer in pointers { free(pointer) } }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
#endif
