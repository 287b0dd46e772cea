public import CoreMetrics
import PushgateCore
import Synchronization

/// The Web Push client's metrics, for one app: connections, messages queued and in flight (summed over the
/// origins' pools), connection attempts, the push services' answers by status, messages sent again and
/// VAPID tokens signed.
///
/// Made once per client with the `MetricsFactory` the gateway hands in (no global bootstrap); every metric
/// object is created here, once, so the hot path only increments a counter it already holds. Labels: `app`,
/// plus a bounded `status` (the statuses RFC 8030 and the push services document, others `other`) and
/// `cause`. Never an endpoint, an origin (a subscription names any host) or a token.
public final class WebPushClientMetrics: Sendable {
    /// Records nothing.
    public static let disabled = WebPushClientMetrics(factory: NOOPMetricsHandler.instance, app: "")

    /// The statuses counted under their own label; any other counts as `other`.
    static let statuses = [200, 201, 202, 400, 401, 403, 404, 410, 413, 429, 500, 502, 503, 504]

    /// Why a written message went back to be sent again.
    enum ResendCause: String, CaseIterable {
        /// A 401/403: the origin's VAPID token was dropped, the message goes again with a fresh one.
        case vapidRefused = "vapid_refused"
        /// Its connection closed before the answer.
        case connectionLost = "connection_lost"
    }

    public let app: String

    private let queued: Gauge
    private let inFlight: Gauge
    private let connections: Gauge
    private let activeConnections: Gauge
    let connectionsOpened: Counter
    let connectionFailures: Counter
    let vapidSignatures: Counter
    private let answers: [Int: Counter]
    private let otherAnswers: Counter
    private let resends: [ResendCause: Counter]
    /// The latest sample of each origin's pool, and their sum (kept as each sample replaces the last, so
    /// that a tick costs the same however many origins there are).
    private let samples = Mutex<(byOrigin: [WebPushOrigin: Sample], total: Sample)>(([:], Sample()))

    private struct Sample {
        var queued = 0
        var inFlight = 0
        var connections = 0
        var activeConnections = 0

        static func + (lhs: Sample, rhs: Sample) -> Sample {
            Sample(
                queued: lhs.queued + rhs.queued,
                inFlight: lhs.inFlight + rhs.inFlight,
                connections: lhs.connections + rhs.connections,
                activeConnections: lhs.activeConnections + rhs.activeConnections
            )
        }

        static func - (lhs: Sample, rhs: Sample) -> Sample {
            Sample(
                queued: lhs.queued - rhs.queued,
                inFlight: lhs.inFlight - rhs.inFlight,
                connections: lhs.connections - rhs.connections,
                activeConnections: lhs.activeConnections - rhs.activeConnections
            )
        }
    }

    public init(factory: any MetricsFactory, app: String) {
        self.app = app
        let labels = [("app", app)]
        queued = Gauge(label: "pushgate_webpush_requests_queued", dimensions: labels, factory: factory)
        inFlight = Gauge(label: "pushgate_webpush_requests_in_flight", dimensions: labels, factory: factory)
        connections = Gauge(label: "pushgate_webpush_connections", dimensions: labels, factory: factory)
        activeConnections = Gauge(label: "pushgate_webpush_connections_usable", dimensions: labels, factory: factory)
        connectionsOpened = Counter(
            label: "pushgate_webpush_connections_opened_total",
            dimensions: labels,
            factory: factory
        )
        connectionFailures = Counter(
            label: "pushgate_webpush_connection_failures_total",
            dimensions: labels,
            factory: factory
        )
        vapidSignatures = Counter(
            label: "pushgate_webpush_vapid_tokens_signed_total",
            dimensions: labels,
            factory: factory
        )
        func answerCounter(_ status: String) -> Counter {
            Counter(
                label: "pushgate_webpush_answers_total",
                dimensions: labels + [("status", status)],
                factory: factory
            )
        }
        answers = Dictionary(uniqueKeysWithValues: Self.statuses.map { ($0, answerCounter(String($0))) })
        otherAnswers = answerCounter("other")
        resends = Dictionary(
            uniqueKeysWithValues: ResendCause.allCases.map { cause in
                (
                    cause,
                    Counter(
                        label: "pushgate_webpush_resends_total",
                        dimensions: labels + [("cause", cause.rawValue)],
                        factory: factory
                    )
                )
            }
        )
    }

    // MARK: Called by the client

    /// At each tick of `origin`'s pool: the gauges show the sum over every origin's latest sample.
    func sampled(origin: WebPushOrigin, queued: Int, inFlight: Int, connections: Int, activeConnections: Int) {
        let sample = Sample(
            queued: queued,
            inFlight: inFlight,
            connections: connections,
            activeConnections: activeConnections
        )
        let total = samples.withLock { samples in
            samples.total = samples.total - (samples.byOrigin[origin] ?? Sample()) + sample
            samples.byOrigin[origin] = sample
            return samples.total
        }
        self.queued.record(total.queued)
        self.inFlight.record(total.inFlight)
        self.connections.record(total.connections)
        self.activeConnections.record(total.activeConnections)
    }

    /// A push service answered a message with `status`.
    func answered(status: Int) {
        (answers[status] ?? otherAnswers).increment()
    }

    /// A written message goes back to be sent again.
    func resent(_ cause: ResendCause, count: Int = 1) {
        resends[cause]?.increment(by: Int64(count))
    }
}
