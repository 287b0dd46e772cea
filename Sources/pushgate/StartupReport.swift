import Foundation
import Synchronization

/// How a detached daemon tells the command that started it whether it got ready: one line over a pipe
/// whose write end the child has as the descriptor named by `PUSHGATE_READY_FD`. `ready` when every
/// port is bound; `error MESSAGE` when start-up failed (the child then exits 78). The parent waits for
/// that line, or for the pipe to close (the child died first), and exits as the child did, so whoever
/// started pushgate sees the real outcome, not an early 0.
enum StartupReport {
    static let descriptorVariable = "PUSHGATE_READY_FD"
    /// How long the parent waits for a child that is neither ready nor dead; then it exits 1 and leaves
    /// the child running (a migration of millions of devices can take this long on a slow disk).
    static let parentPatience: Duration = .seconds(300)

    /// The child's end: taken from the environment once, at start-up.
    final class Channel: Sendable {
        private let descriptor: Int32
        private let sent = Mutex(false)

        /// The pipe the parent handed us, if any; marked close-on-exec so that nothing we spawn keeps it.
        static func inherited(environment: [String: String] = ProcessInfo.processInfo.environment) -> Channel? {
            guard let value = environment[descriptorVariable], let descriptor = Int32(value), descriptor > 2,
                fcntl(descriptor, F_SETFD, FD_CLOEXEC) == 0
            else { return nil }
            unsetenv(descriptorVariable)
            return Channel(descriptor: descriptor)
        }

        private init(descriptor: Int32) { self.descriptor = descriptor }

        func ready() { send("ready") }

        func failed(_ message: String) { send("error " + message.replacingOccurrences(of: "\n", with: " ")) }

        /// One line, once; then the pipe is closed, which is what the parent waits for.
        private func send(_ line: String) {
            let first = sent.withLock { sent in
                defer { sent = true }
                return !sent
            }
            guard first else { return }
            let bytes = Array((line + "\n").utf8)
            _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            close(descriptor)
        }
    }

    /// What the parent learnt from the pipe.
    enum Outcome: Equatable {
        case ready
        case failed(String)
        /// The pipe closed without a line: the child died before it could say.
        case silent
        case timedOut
    }

    /// Reads the child's line (the parent's side). Pure over the bytes read.
    static func outcome(of text: String) -> Outcome {
        let line = text.split(separator: "\n", maxSplits: 1).first.map(String.init) ?? ""
        if line == "ready" { return .ready }
        if line.hasPrefix("error ") { return .failed(String(line.dropFirst(6))) }
        return .silent
    }

    /// Waits on the read end until the child writes its line or closes the pipe, at most `patience`.
    static func await(readEnd: Int32, patience: Duration = parentPatience) -> Outcome {
        var collected: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = ContinuousClock.now.advanced(by: patience)
        while true {
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero else { return .timedOut }
            var poller = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(min(remaining.components.seconds * 1000 + 1, 60_000))
            let polled = poll(&poller, 1, milliseconds)
            if polled < 0 && errno == EINTR { continue }
            if polled == 0 { continue }
            let count = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return outcome(of: String(decoding: collected, as: UTF8.self)) }
            collected += buffer[0..<count]
            if collected.contains(UInt8(ascii: "\n")) { return outcome(of: String(decoding: collected, as: UTF8.self)) }
        }
    }
}
