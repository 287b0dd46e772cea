import Synchronization

/// Which UDP port a datagram came in on.
public enum UDPIngressPort: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// Registrations (7734 by default).
    case registration
    /// Notification requests (7874 by default).
    case notification

    public var description: String { rawValue }
}

/// The reasons the listener itself adds to the parsers' `ValidationError` codes and the store's
/// `StoreError` codes, as counted in ``UDPIngressStatistics/PortStatistics/rejected``.
public enum UDPIngressRejection {
    /// The datagram filled the receive buffer: it may have been truncated, so it is not parsed.
    public static let datagramTooLarge = "datagram_too_large"
    /// The store failed with an error that is not a `StoreError`.
    public static let storeFailure = "store_failure"
    /// The sender's address is not in `udp.allow` (``UDPIngress/Configuration/allowedSenders``): counted
    /// apart, as refused, and never parsed.
    public static let senderNotAllowed = "sender_not_allowed"
    /// A registration read while the store was out, beyond what the outage buffer keeps
    /// (``UDPIngress/Configuration/outageRegistrationLimit``).
    public static let storeOutageOverflow = "store_outage_overflow"
    /// A registration read while the store was out and still waiting for it when the shutdown timeout ended
    /// the wait.
    public static let storeOutageShutdown = "store_outage_shutdown"
}

/// Where the listener reports what happens to datagrams, for metrics. Called from event loops and the
/// consumer tasks: implementations must be cheap and thread-safe. Every method has a no-op default.
/// Reasons are bounded: the codes listed in `docs/udp.md`.
public protocol UDPIngressObserver: Sendable {
    func datagramReceived(on port: UDPIngressPort, bytes: Int)
    func datagramsApplied(on port: UDPIngressPort, count: Int)
    func datagramRejected(on port: UDPIngressPort, reason: String)
    /// A datagram from a sender outside ``UDPIngress/Configuration/allowedSenders``, dropped unparsed.
    func datagramRefused(on port: UDPIngressPort)
    /// One registration transaction: how many registrations, and how long the store took.
    func registrationBatchWritten(count: Int, duration: Duration)
}

extension UDPIngressObserver {
    public func datagramReceived(on port: UDPIngressPort, bytes: Int) {}
    public func datagramsApplied(on port: UDPIngressPort, count: Int) {}
    public func datagramRejected(on port: UDPIngressPort, reason: String) {}
    public func datagramRefused(on port: UDPIngressPort) {}
    public func registrationBatchWritten(count: Int, duration: Duration) {}
}

/// The observer that observes nothing.
public struct NoOpUDPIngressObserver: UDPIngressObserver {
    public init() {}
}

/// A snapshot of the listener's counters since it was created.
public struct UDPIngressStatistics: Hashable, Sendable {
    public struct PortStatistics: Hashable, Sendable {
        /// Datagrams read from the socket(s).
        public var received = 0
        /// Datagrams whose effect is in the store (registrations written, notifications submitted).
        public var applied = 0
        /// Datagrams rejected, by reason code (`malformed_json`, `unknown_group`...).
        public var rejected: [String: Int] = [:]
        /// Datagrams from senders outside `udp.allow`, dropped before they were parsed.
        public var refused = 0

        public var rejectedTotal: Int { rejected.values.reduce(0, +) }
        /// Read but neither applied, rejected nor refused yet (queued or being written).
        public var inFlight: Int { received - applied - rejectedTotal - refused }

        public init() {}
    }

    public var registration = PortStatistics()
    public var notification = PortStatistics()
    /// Registration transactions written, and the largest one.
    public var registrationBatches = 0
    public var largestRegistrationBatch = 0

    public init() {}

    public subscript(port: UDPIngressPort) -> PortStatistics {
        get { port == .registration ? registration : notification }
        set {
            if port == .registration { registration = newValue } else { notification = newValue }
        }
    }
}

/// The listener's counters: kept for tests and health, and forwarded to the observer.
final class UDPIngressCounters: Sendable {
    private let statistics = Mutex(UDPIngressStatistics())
    let observer: any UDPIngressObserver

    init(observer: any UDPIngressObserver) {
        self.observer = observer
    }

    var snapshot: UDPIngressStatistics { statistics.withLock { $0 } }

    func received(on port: UDPIngressPort, bytes: Int) {
        statistics.withLock { $0[port].received += 1 }
        observer.datagramReceived(on: port, bytes: bytes)
    }

    func applied(on port: UDPIngressPort, count: Int) {
        guard count > 0 else { return }
        statistics.withLock { $0[port].applied += count }
        observer.datagramsApplied(on: port, count: count)
    }

    func rejected(on port: UDPIngressPort, reason: String) {
        statistics.withLock { $0[port].rejected[reason, default: 0] += 1 }
        observer.datagramRejected(on: port, reason: reason)
    }

    func refused(on port: UDPIngressPort) {
        statistics.withLock { $0[port].refused += 1 }
        observer.datagramRefused(on: port)
    }

    func registrationBatchWritten(count: Int, duration: Duration) {
        statistics.withLock {
            $0.registrationBatches += 1
            $0.largestRegistrationBatch = max($0.largestRegistrationBatch, count)
        }
        observer.registrationBatchWritten(count: count, duration: duration)
    }
}
