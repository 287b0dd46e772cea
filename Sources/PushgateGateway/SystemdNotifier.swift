public import Foundation
import Logging
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

/// systemd's service notifications (`Type=notify`), without libsystemd: one datagram per state to the Unix
/// socket named by `NOTIFY_SOCKET` (an `@` first means Linux's abstract namespace). `READY=1` once every
/// port is bound, `STOPPING=1` when a stop begins, and `WATCHDOG=1` every half of `WATCHDOG_USEC` while
/// running if the unit sets `WatchdogSec`. Without `NOTIFY_SOCKET` (not started by systemd) it does nothing.
public struct SystemdNotifier: Sendable {
    let socketPath: String?
    let watchdogInterval: Duration?

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        // WATCHDOG_PID, when set, names the process the watchdog is for.
        let forUs = environment["WATCHDOG_PID"].map { Int32($0) == getpid() } ?? true
        watchdogInterval = environment["WATCHDOG_USEC"].flatMap { UInt64($0) }.flatMap { microseconds in
            forUs && microseconds > 0 ? .microseconds(Int64(microseconds / 2)) : nil
        }
    }

    public var isActive: Bool { socketPath != nil }

    /// Sends one notification (`KEY=VALUE` lines); false when it could not be sent.
    @discardableResult
    public func notify(_ state: String) -> Bool {
        guard let socketPath else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var path = Array(socketPath.utf8)
        if path.first == UInt8(ascii: "@") { path[0] = 0 }  // abstract namespace
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in path.enumerated() { buffer[index] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count)
        let bytes = Array(state.utf8)
        let sent = bytes.withUnsafeBytes { buffer in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, buffer.baseAddress, buffer.count, 0, $0, length)
                }
            }
        }
        return sent == bytes.count
    }

    /// A service that sends `WATCHDOG=1` on time while the gateway runs, and `STOPPING=1` when a stop begins.
    func service() -> some Service { NotifierService(notifier: self) }
}

private struct NotifierService: Service {
    let notifier: SystemdNotifier

    func run() async throws {
        if let interval = notifier.watchdogInterval {
            while !Task.isCancelled {
                notifier.notify("WATCHDOG=1")
                do {
                    try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
                } catch {
                    break
                }
            }
        } else {
            try? await gracefulShutdown()
        }
        notifier.notify("STOPPING=1")
    }
}
