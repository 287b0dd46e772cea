import CoreMetrics
import Foundation
import Logging
public import PushgateCore
import Synchronization

/// The dispatcher's ``MisconfigurationBreaker``, behind a lock: fed every answer of every service,
/// asked before each send, and the alarm's log lines, metrics and readiness (`/readyz`).
///
/// Metrics: `pushgate_misconfiguration_alarm{app,service}` (1 while an alarm holds the app's sending on the
/// service) and `pushgate_misconfiguration_trips_total{app,service,cause}` (`environment`, `topic`,
/// `project`, `credentials`). Log: one warning when it trips, one per failed probe (at most one per back-off, 30 s doubling
/// to 10 minutes by default), one info line when it clears.
final class MisconfigurationMonitor: Sendable {
    typealias Breaker = MisconfigurationBreaker

    /// Recorded as the reason of a device held without being sent.
    static let heldReason = "held_misconfiguration"

    private let breaker: Mutex<Breaker>
    /// False: every answer proceeds and nothing is held.
    private let enabled: Bool
    /// Lets the send path skip the lock while no alarm is in force (the common case).
    private let holding = Atomic<Bool>(false)
    private let logger: Logger
    private let factory: any MetricsFactory
    private let gauges = Mutex<[Breaker.Key: Gauge]>([:])

    /// nil `configuration`: off (every answer proceeds, nothing is held).
    init(configuration: Breaker.Configuration?, logger: Logger, factory: any MetricsFactory) {
        self.breaker = Mutex(Breaker(configuration: configuration ?? Breaker.Configuration()))
        self.enabled = configuration != nil
        self.logger = logger
        self.factory = factory
    }

    /// How long a suspect answer may stay deferred at most.
    var window: Duration { breaker.withLock { $0.configuration.window } }

    /// What an outcome says about its app's configuration; nil when nothing (no answer from the service, a
    /// retryable answer, a credential alarm that has its own handling). Read by each service's plug-in
    /// (``PushOutcome/configurationSignal``).
    static func answer(_ outcome: PushOutcome) -> Breaker.Answer? {
        outcome.configurationSignal
    }

    /// An answer of `app`'s notification: proceed, defer or hold.
    func judge(_ outcome: PushOutcome, app: String, now: Date) -> Breaker.Verdict {
        guard enabled, let answer = Self.answer(outcome) else { return .proceed }
        let key = Breaker.Key(app: app, service: outcome.service)
        let decision = breaker.withLock { breaker in
            defer { holding.store(breaker.isHoldingAny, ordering: .relaxed) }
            return breaker.answered(key, answer, now: now)
        }
        if let transition = decision.transition { report(transition) }
        return decision.verdict
    }

    /// Asks again about a deferred answer.
    func resolve(_ ticket: Breaker.Ticket, now: Date) -> Breaker.Verdict {
        guard enabled else { return .proceed }
        return breaker.withLock { $0.resolve(ticket, now: now) }
    }

    /// Whether a notification of `app` may be sent on `service` now.
    func admit(app: String, service: PushPlatform, now: Date) -> Breaker.Admission {
        guard enabled, holding.load(ordering: .relaxed) else { return .send }
        let (admission, transition) = breaker.withLock { breaker in
            defer { holding.store(breaker.isHoldingAny, ordering: .relaxed) }
            return breaker.admit(Breaker.Key(app: app, service: service), now: now)
        }
        if let transition { report(transition) }
        return admission
    }

    var alarms: [Breaker.Alarm] { breaker.withLock { $0.alarms } }

    private func report(_ transition: Breaker.Transition) {
        switch transition {
        case .tripped(let alarm):
            gauge(alarm.key).record(1)
            Counter(
                label: "pushgate_misconfiguration_trips_total",
                dimensions: [
                    ("app", alarm.key.app), ("service", alarm.key.service.rawValue),
                    ("cause", alarm.suspicion.rawValue),
                ],
                factory: factory
            ).increment()
            logger.warning(
                "configuration alarm: most of the app's answers say its devices are not for this configuration; its sending on this service is held and no device is invalidated for it",
                metadata: metadata(alarm)
            )
        case .probeFailed(let alarm):
            logger.warning(
                "configuration alarm persists: a probe's answers are still suspect; sending stays held",
                metadata: metadata(alarm)
            )
        case .cleared(let key, let since):
            gauge(key).record(0)
            logger.info(
                "configuration alarm cleared: a probe's answers are sane again; held devices are sent",
                metadata: [
                    "push.app": "\(key.app)", "push.service": "\(key.service)",
                    "push.alarm_since": "\(since.formatted(.iso8601))",
                ]
            )
        }
    }

    private func metadata(_ alarm: Breaker.Alarm) -> Logger.Metadata {
        [
            "push.app": "\(alarm.key.app)", "push.service": "\(alarm.key.service)",
            "push.suspect_answers": "\(alarm.suspects)", "push.answers": "\(alarm.answers)",
            "push.likely_cause": "\(alarm.suspicion.likelyCause)",
            "push.next_probe": "\(alarm.probeAt.formatted(.iso8601))",
        ]
    }

    private func gauge(_ key: Breaker.Key) -> Gauge {
        gauges.withLock { cache in
            if let gauge = cache[key] { return gauge }
            let gauge = Gauge(
                label: "pushgate_misconfiguration_alarm",
                dimensions: [("app", key.app), ("service", key.service.rawValue)],
                factory: factory
            )
            cache[key] = gauge
            return gauge
        }
    }
}

extension MisconfigurationBreaker.Alarm {
    /// One line for `/readyz`: the app, the service, what was seen and the likely cause.
    public var summary: String {
        "app \(key.app) (\(key.service)): \(suspects) of its last \(answers) answers refuse \(suspicion == .credentials ? "the provider token" : "the device tokens"): \(suspicion.likelyCause); its sending is held and its devices kept until a probe (next \(probeAt.formatted(.iso8601))) finds the answers sane, or a restart"
    }
}

extension Dispatcher {
    /// `disposition` held by a configuration alarm: the device is sent again no earlier than `until`, and
    /// neither failed nor invalidated for this answer, within the request's deadline (its expiration, as the
    /// retry policy reads it); once that has passed, it fails as `expired`, still without invalidation.
    func held(
        _ disposition: OutcomeDisposition,
        until: Date,
        request: NotificationRequest,
        now: Date
    ) -> OutcomeDisposition {
        var until = until
        let reason: String
        switch disposition {
        case .accepted: return disposition
        case .failed(let failed, _, _): reason = failed
        case .retry(let at, let retry):
            reason = retry
            until = max(until, at)
        }
        let deadline = configuration.retryPolicy.deadline(for: request.expiration, acceptedAt: request.createdAt)
        guard now < deadline else { return .failed(reason: FailureEntry.expiredReason, status: nil, invalidation: nil) }
        return .retry(at: min(until, deadline), reason: reason)
    }
}
