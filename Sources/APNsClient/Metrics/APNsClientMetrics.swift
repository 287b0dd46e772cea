public import CoreMetrics
import NIOCore
import PushgateCore
import Synchronization

/// The client's metrics, for one app: connections and streams in use, requests queued for a stream,
/// connection attempts, provider-token refreshes and the APNs round-trip time.
///
/// Made once per client with the `MetricsFactory` the gateway hands in (no global bootstrap: each
/// gateway, and each test, has its own registry); every metric object is created here, once, so the
/// hot path only increments counters. The round trip (request written → answer complete) is timed for
/// one answer in ``roundTripSampleInterval``: a histogram takes a lock per observation, which 100,000
/// answers a second spread over several event loops should not pay. The counters are exact.
///
/// Labels: `app` only. Never a device token, an apns-id or a path.
public final class APNsClientMetrics: Sendable {
    /// Records nothing.
    public static let disabled = APNsClientMetrics(factory: NOOPMetricsHandler.instance, app: "")

    public let app: String
    /// One answer in this many is timed for `pushgate_apns_round_trip_seconds`.
    public let roundTripSampleInterval: Int

    let queued: Gauge
    let streamsInUse: Gauge
    let connections: Gauge
    let activeConnections: Gauge
    let connectionsOpened: Counter
    let connectionFailures: Counter
    let providerTokenRefreshes: Counter
    let providerTokensRejected: Counter
    let roundTrip: Timer

    private let answers = Atomic<UInt64>(0)
    /// `iat` of the provider token last handed to a connection; a different one is a refresh.
    private let lastTokenIssuedAt = Atomic<Int64>(.min)

    public init(factory: any MetricsFactory, app: String, roundTripSampleInterval: Int = 16) {
        self.app = app
        self.roundTripSampleInterval = max(1, roundTripSampleInterval)
        let labels = [("app", app)]
        queued = Gauge(label: "pushgate_apns_requests_queued", dimensions: labels, factory: factory)
        streamsInUse = Gauge(label: "pushgate_apns_streams_in_use", dimensions: labels, factory: factory)
        connections = Gauge(label: "pushgate_apns_connections", dimensions: labels, factory: factory)
        activeConnections = Gauge(label: "pushgate_apns_connections_usable", dimensions: labels, factory: factory)
        connectionsOpened = Counter(
            label: "pushgate_apns_connections_opened_total",
            dimensions: labels,
            factory: factory
        )
        connectionFailures = Counter(
            label: "pushgate_apns_connection_failures_total",
            dimensions: labels,
            factory: factory
        )
        providerTokenRefreshes = Counter(
            label: "pushgate_apns_provider_token_refreshes_total",
            dimensions: labels,
            factory: factory
        )
        providerTokensRejected = Counter(
            label: "pushgate_apns_provider_tokens_expired_total",
            dimensions: labels,
            factory: factory
        )
        roundTrip = Timer(label: "pushgate_apns_round_trip_seconds", dimensions: labels, factory: factory)
    }

    // MARK: Called by the pool

    func sampled(queued: Int, streamsInUse: Int, connections: Int, activeConnections: Int) {
        self.queued.record(queued)
        self.streamsInUse.record(streamsInUse)
        self.connections.record(connections)
        self.activeConnections.record(activeConnections)
    }

    func streamAnswered(roundTrip duration: TimeAmount) {
        let n = answers.wrappingAdd(1, ordering: .relaxed).oldValue
        if n % UInt64(roundTripSampleInterval) == 0 { roundTrip.recordNanoseconds(duration.nanoseconds) }
    }

    func providerTokenHandedOut(_ token: ProviderToken) {
        let issuedAt = token.issuedAtSeconds
        guard lastTokenIssuedAt.load(ordering: .relaxed) != issuedAt else { return }
        // Several connections may see the new token at once: only the one that swaps counts it.
        let previous = lastTokenIssuedAt.exchange(issuedAt, ordering: .relaxed)
        if previous != issuedAt { providerTokenRefreshes.increment() }
    }
}
