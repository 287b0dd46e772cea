public import CoreMetrics
import Foundation
import PushgateCore
import Synchronization

/// The dispatcher's metrics: every outcome by app, service (`apns`, `fcm`), push type, status, reason
/// and what the ledger made of it; targets skipped (invalidated or removed after their request was stored)
/// by app; devices invalidated by app, service and reason; configuration alarms
/// (FCM devices of an app without FCM credentials, FCM refusing the app's credentials); the end-to-end
/// latency (request accepted → the service's answer); notification requests and targets accepted.
///
/// Hot-path care: outcomes are tallied in a plain local value (``OutcomeTally``) while a chunk is
/// delivered and added to the counters when the batch is recorded in the ledger, so a counter moves
/// by a batch's worth in one atomic add, and only for outcomes that are durable. Counter objects are
/// made once per label set and kept. The end-to-end latency is observed for one outcome in
/// ``latencySampleInterval`` (a histogram observation takes a lock).
///
/// Labels never carry a device token, an apns-id or a request id. Reasons Apple or Google may add later
/// (`APNsReason.unknown`, `FCMErrorCode.unknown`) are all counted as `unknown`, so a misbehaving server
/// cannot grow the label set.
public final class DispatchMetrics: Sendable {
    /// Records nothing.
    public static let disabled = DispatchMetrics(factory: NOOPMetricsHandler.instance)

    public let latencySampleInterval: Int
    let factory: any MetricsFactory
    private let outcomeCounters = Mutex<[OutcomeKey: Counter]>([:])
    private let invalidationCounters = Mutex<[InvalidationKey: Counter]>([:])
    private let alarmCounters = Mutex<[AlarmKey: Counter]>([:])
    private let latencyTimers = Mutex<[String: CoreMetrics.Timer]>([:])
    private let intakeCounters = Mutex<[String: (requests: Counter, targets: Counter)]>([:])
    private let skippedCounters = Mutex<[String: Counter]>([:])

    public init(factory: any MetricsFactory, latencySampleInterval: Int = 16) {
        self.factory = factory
        self.latencySampleInterval = max(1, latencySampleInterval)
    }

    /// A tally for one batch of outcomes.
    func tally() -> OutcomeTally { OutcomeTally(sampleInterval: latencySampleInterval) }

    /// Adds a recorded batch to the counters and empties it.
    func record(_ tally: inout OutcomeTally) {
        for (key, count) in tally.outcomes {
            counter(key).increment(by: count)
        }
        for (key, count) in tally.invalidations {
            invalidationCounter(key).increment(by: count)
        }
        for (key, count) in tally.alarms {
            alarmCounter(key).increment(by: count)
        }
        for (app, count) in tally.skipped {
            skippedCounter(app).increment(by: count)
        }
        for (app, nanoseconds) in tally.latencies {
            let timer = latencyTimer(app)
            for value in nanoseconds { timer.recordNanoseconds(value) }
        }
        tally.removeAll()
    }

    /// A notification request was stored (`POST /v1/notifications` or a UDP datagram).
    func requestAccepted(app: String, targets: Int) {
        let counters = intakeCounters.withLock { cache in
            if let counters = cache[app] { return counters }
            let counters = (
                Counter(label: "pushgate_notification_requests_total", dimensions: [("app", app)], factory: factory),
                Counter(label: "pushgate_notification_targets_total", dimensions: [("app", app)], factory: factory)
            )
            cache[app] = counters
            return counters
        }
        counters.requests.increment()
        counters.targets.increment(by: targets)
    }

    private func counter(_ key: OutcomeKey) -> Counter {
        outcomeCounters.withLock { cache in
            if let counter = cache[key] { return counter }
            let counter = Counter(
                label: "pushgate_notifications_total",
                dimensions: [
                    ("app", key.app), ("service", key.service.rawValue), ("push_type", key.pushType.rawValue),
                    ("status", key.status.map { "\($0)" } ?? "none"),
                    ("reason", key.reason), ("result", key.result.rawValue),
                ],
                factory: factory
            )
            cache[key] = counter
            return counter
        }
    }

    private func skippedCounter(_ app: String) -> Counter {
        skippedCounters.withLock { cache in
            if let counter = cache[app] { return counter }
            let counter = Counter(
                label: "pushgate_notifications_skipped_total",
                dimensions: [("app", app)],
                factory: factory
            )
            cache[app] = counter
            return counter
        }
    }

    private func invalidationCounter(_ key: InvalidationKey) -> Counter {
        invalidationCounters.withLock { cache in
            if let counter = cache[key] { return counter }
            let counter = Counter(
                label: "pushgate_devices_invalidated_total",
                dimensions: [("app", key.app), ("service", key.service.rawValue), ("reason", key.reason)],
                factory: factory
            )
            cache[key] = counter
            return counter
        }
    }

    private func alarmCounter(_ key: AlarmKey) -> Counter {
        alarmCounters.withLock { cache in
            if let counter = cache[key] { return counter }
            let counter = Counter(
                label: "pushgate_configuration_alarms_total",
                dimensions: [("app", key.app), ("service", key.service.rawValue), ("reason", key.reason)],
                factory: factory
            )
            cache[key] = counter
            return counter
        }
    }

    private func latencyTimer(_ app: String) -> CoreMetrics.Timer {
        latencyTimers.withLock { cache in
            if let timer = cache[app] { return timer }
            let timer = CoreMetrics.Timer(
                label: "pushgate_notification_latency_seconds",
                dimensions: [("app", app)],
                factory: factory
            )
            cache[app] = timer
            return timer
        }
    }
}

struct OutcomeKey: Hashable {
    enum Result: String {
        case accepted, failed, retry
    }

    var app: String
    var service: PushPlatform
    var pushType: PushType
    var status: Int?
    var reason: String
    var result: Result
}

struct InvalidationKey: Hashable {
    var app: String
    var service: PushPlatform
    var reason: String
}

/// A device failed for its app's configuration, not for itself (it is never pruned for it).
struct AlarmKey: Hashable {
    var app: String
    var service: PushPlatform
    var reason: String
}

/// Outcomes of one batch, counted locally (no lock, no atomic) until the batch is recorded.
struct OutcomeTally {
    let sampleInterval: Int
    private(set) var outcomes: [OutcomeKey: Int64] = [:]
    private(set) var invalidations: [InvalidationKey: Int64] = [:]
    private(set) var alarms: [AlarmKey: Int64] = [:]
    /// Targets skipped by the pages (invalidated or removed after their request was stored), per app.
    private(set) var skipped: [String: Int64] = [:]
    /// Sampled end-to-end latencies per app, in nanoseconds.
    private(set) var latencies: [String: [Int64]] = [:]
    private var seen = 0

    init(sampleInterval: Int) {
        self.sampleInterval = sampleInterval
    }

    var isEmpty: Bool { outcomes.isEmpty }

    mutating func add(
        _ outcome: PushOutcome,
        disposition: OutcomeDisposition,
        request: NotificationRequest,
        now: Date
    ) {
        let reason = outcome.metricsReason
        add(service: outcome.service, status: outcome.status, reason: reason, disposition, request: request, now: now)
        if outcome.isConfigurationAlarm {
            alarms[AlarmKey(app: request.app, service: outcome.service, reason: reason), default: 0] += 1
        }
    }

    /// Targets of `app` a page skipped, recorded with this batch.
    mutating func addSkipped(_ count: Int, app: String) {
        guard count > 0 else { return }
        skipped[app, default: 0] += Int64(count)
    }

    /// A device that could not be sent at all (`reason`: ``OutcomeDisposition/notConfigured(_:)``...):
    /// counted as a failure without a status, and as an alarm of its app's configuration.
    mutating func addUnsendable(service: PushPlatform, reason: String, request: NotificationRequest, now: Date) {
        add(
            service: service,
            status: nil,
            reason: reason,
            .failed(reason: reason, status: nil, invalidation: nil),
            request: request,
            now: now
        )
        alarms[AlarmKey(app: request.app, service: service, reason: reason), default: 0] += 1
    }

    /// A device held by a configuration alarm without being sent: counted as a retry without a status.
    mutating func addHeld(service: PushPlatform, request: NotificationRequest, now: Date) {
        let reason = MisconfigurationMonitor.heldReason
        add(service: service, status: nil, reason: reason, .retry(at: now, reason: reason), request: request, now: now)
    }

    private mutating func add(
        service: PushPlatform,
        status: Int?,
        reason: String,
        _ disposition: OutcomeDisposition,
        request: NotificationRequest,
        now: Date
    ) {
        let result: OutcomeKey.Result
        switch disposition {
        case .accepted: result = .accepted
        case .failed(_, _, let invalidation):
            result = .failed
            if let invalidation {
                let key = InvalidationKey(app: request.app, service: service, reason: Self.label(invalidation.reason))
                invalidations[key, default: 0] += 1
            }
        case .retry: result = .retry
        }
        let key = OutcomeKey(
            app: request.app,
            service: service,
            pushType: request.pushType,
            status: status,
            reason: reason,
            result: result
        )
        outcomes[key, default: 0] += 1
        if status != nil {
            if seen % sampleInterval == 0 {
                let seconds = now.timeIntervalSince(request.createdAt)
                latencies[request.app, default: []].append(Int64(max(0, seconds) * 1e9))
            }
            seen &+= 1
        }
    }

    /// Adds `other`'s counts (a batch whose record failed goes back into the next one).
    mutating func merge(_ other: OutcomeTally) {
        outcomes.merge(other.outcomes, uniquingKeysWith: +)
        invalidations.merge(other.invalidations, uniquingKeysWith: +)
        alarms.merge(other.alarms, uniquingKeysWith: +)
        skipped.merge(other.skipped, uniquingKeysWith: +)
        latencies.merge(other.latencies, uniquingKeysWith: +)
    }

    mutating func removeAll() {
        outcomes.removeAll(keepingCapacity: true)
        invalidations.removeAll(keepingCapacity: true)
        alarms.removeAll(keepingCapacity: true)
        skipped.removeAll(keepingCapacity: true)
        latencies.removeAll(keepingCapacity: true)
    }

    /// An invalidation reason as a metrics label; reasons this build does not know are `unknown`.
    static func label(_ reason: APNsReason) -> String {
        if case .unknown = reason { return "unknown" }
        return reason.rawValue
    }
}
