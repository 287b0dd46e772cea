import Foundation
import PushgateCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `Type=notify`: the daemon tells systemd READY=1 once its ports are bound, WATCHDOG=1 while it runs, and
/// STOPPING=1 when a stop begins, over the datagram socket named by NOTIFY_SOCKET.
@Suite("systemd notifications (NOTIFY_SOCKET)", .timeLimit(.minutes(3)))
struct SystemdNotifyTests {
    /// A Unix datagram socket standing in for systemd's.
    final class NotifySocket: @unchecked Sendable {
        // @unchecked: the descriptor is only read from, one call at a time.
        let path: String
        private let fd: Int32

        init(path: String) throws {
            self.path = path
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { buffer in
                for (index, byte) in path.utf8.enumerated() { buffer[index] = byte }
            }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            guard bound == 0 else { throw ExternalTools.ToolError("bind \(path) failed") }
            var timeout = timeval(tv_sec: 60, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }

        /// The next notification (nil after 60 s without one), read off the cooperative pool.
        func next() async -> String? {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    var buffer = [UInt8](repeating: 0, count: 4096)
                    let count = buffer.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
                    continuation.resume(returning: count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : nil)
                }
            }
        }

        deinit {
            close(fd)
            unlink(path)
        }
    }

    @Test("READY=1 with MAINPID once every port is bound, WATCHDOG=1 on time, STOPPING=1 at SIGTERM")
    func notifications() async throws {
        let directory = try TemporaryDirectory()
        let notify = try NotifySocket(path: directory.path("notify.sock"))
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: GatewayCrashTests.gatewayBinary)
        process.arguments = [
            "-f", "--simulator", "-d", directory.path("n.db"), "-l", "127.0.0.1", "-g", "0", "-n", "0", "--http-port",
            "0",
        ]
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PUSHGATE_") }
        environment["NOTIFY_SOCKET"] = notify.path
        environment["WATCHDOG_USEC"] = "400000"
        process.environment = environment
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        var seen: [String] = []
        while let message = await notify.next() {
            seen.append(message)
            if message.hasPrefix("READY=1") { break }
        }
        let ready = try #require(seen.last)
        #expect(ready == "READY=1\nMAINPID=\(process.processIdentifier)")
        var watchdogs = 0
        while watchdogs < 3, let message = await notify.next() {
            if message == "WATCHDOG=1" { watchdogs += 1 }
        }
        #expect(watchdogs == 3)
        kill(process.processIdentifier, SIGTERM)
        var stopping = false
        while let message = await notify.next() {
            if message == "STOPPING=1" {
                stopping = true
                break
            }
        }
        #expect(stopping)
    }
}
