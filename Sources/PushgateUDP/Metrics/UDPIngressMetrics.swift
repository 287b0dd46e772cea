public import CoreMetrics
import Synchronization

/// The UDP ingress's metrics through swift-metrics: datagrams received, applied and rejected by reason,
/// per port, and the registration transactions. Plug it in as the listener's `UDPIngressObserver`.
///
/// Received, applied and refused counters exist from the start (one atomic add per datagram). Rejection
/// counters are made on a reason's first rejection and kept; reasons are the bounded codes of
/// `docs/udp.md`, and past ``maximumReasons`` distinct ones the rest count as `other`, whatever a
/// future code path might pass.
public final class UDPIngressMetrics: UDPIngressObserver {
    public static let maximumReasons = 64

    private let factory: any MetricsFactory
    private let received: [UDPIngressPort: Counter]
    private let applied: [UDPIngressPort: Counter]
    private let refused: [UDPIngressPort: Counter]
    private let rejected = Mutex<[String: Counter]>([:])
    private let registrationBatch: Timer

    public init(factory: any MetricsFactory) {
        self.factory = factory
        var received: [UDPIngressPort: Counter] = [:]
        var applied: [UDPIngressPort: Counter] = [:]
        var refused: [UDPIngressPort: Counter] = [:]
        for port in UDPIngressPort.allCases {
            received[port] = Counter(
                label: "pushgate_udp_datagrams_received_total",
                dimensions: [("port", port.rawValue)],
                factory: factory
            )
            applied[port] = Counter(
                label: "pushgate_udp_datagrams_applied_total",
                dimensions: [("port", port.rawValue)],
                factory: factory
            )
            refused[port] = Counter(
                label: "pushgate_udp_datagrams_refused_total",
                dimensions: [("port", port.rawValue)],
                factory: factory
            )
        }
        self.received = received
        self.applied = applied
        self.refused = refused
        self.registrationBatch = Timer(label: "pushgate_udp_registration_batch_seconds", factory: factory)
    }

    public func datagramReceived(on port: UDPIngressPort, bytes: Int) {
        received[port]?.increment()
    }

    public func datagramsApplied(on port: UDPIngressPort, count: Int) {
        applied[port]?.increment(by: count)
    }

    public func datagramRejected(on port: UDPIngressPort, reason: String) {
        let counter = rejected.withLock { cache in
            let key = "\(port.rawValue)/\(reason)"
            if let counter = cache[key] { return counter }
            let label = cache.count < Self.maximumReasons ? reason : "other"
            let counter = Counter(
                label: "pushgate_udp_datagrams_rejected_total",
                dimensions: [("port", port.rawValue), ("reason", label)],
                factory: factory
            )
            if label == reason { cache[key] = counter }
            return counter
        }
        counter.increment()
    }

    public func datagramRefused(on port: UDPIngressPort) {
        refused[port]?.increment()
    }

    public func registrationBatchWritten(count: Int, duration: Duration) {
        registrationBatch.recordNanoseconds(
            duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
        )
    }
}
