public import Foundation

/// What became of one message sent to one device, in the words every push service shares. The
/// dispatcher, its outcome collector, the ledger's decision (`OutcomeDisposition`), the
/// misconfiguration breaker and the metrics read only this; each service maps its own answer onto it
/// (``init(apns:)``, ``init(fcm:)``), in its own target's vocabulary.
public struct PushOutcome: Hashable, Sendable, CustomStringConvertible {
    /// What the answer means for the device.
    public enum Verdict: Hashable, Sendable {
        /// The service accepted the message.
        case delivered
        /// Not delivered, and safe to send again: the retry policy decides from ``PushOutcome/outcomeClass``
        /// (retryable or connection-fatal), no earlier than ``PushOutcome/notBefore``.
        case retry
        /// Rejected for good because the device's token is dead: the device is invalidated for `reason`
        /// (the registry's one vocabulary of invalidation reasons), `at` the time the service gave, if any.
        case invalidate(reason: APNsReason, at: Date?)
        /// The app's configuration, not the device, is wrong (credentials, project): the device is never
        /// invalidated. `held`: it waits, no earlier than ``PushOutcome/notBefore``, until its request's
        /// deadline; otherwise it fails at once.
        case configurationAlarm(held: Bool)
        /// Failed for good, the device kept: a rejection, or no answer to an attempt that may have reached
        /// the service (sending it again could deliver it twice).
        case failed
    }

    /// The platform of the service that answered (the registry's device platform).
    public var service: PushPlatform
    public var verdict: Verdict
    public var outcomeClass: OutcomeClass
    /// The HTTP status of the answer; nil when there was none.
    public var status: Int?
    /// The reason recorded in the ledger: the service's reason or error code, or the transport failure's
    /// label; empty for an accepted message.
    public var reason: String
    /// A bounded label for metrics: `none` for an accepted message; reasons this build does not know are
    /// `unknown`, so a misbehaving server cannot grow the label set.
    public var metricsReason: String
    /// Kept on acceptance, where the ledger keeps the last apns-id: APNs's apns-id, FCM's message name.
    public var acceptedID: String? = nil
    /// No new attempt before this long from now (the service's `Retry-After`, or the next credential fetch).
    public var notBefore: Duration? = nil
    /// Why there was no answer, when there was none.
    public var failure: PushTransportFailure? = nil
    /// What the answer says about the app's configuration, for the misconfiguration breaker; nil when it
    /// says nothing (no answer, a retryable answer, a configuration alarm that has its own handling).
    public var configurationSignal: MisconfigurationBreaker.Answer? = nil

    public init(
        service: PushPlatform,
        verdict: Verdict,
        outcomeClass: OutcomeClass,
        status: Int?,
        reason: String,
        metricsReason: String
    ) {
        self.service = service
        self.verdict = verdict
        self.outcomeClass = outcomeClass
        self.status = status
        self.reason = reason
        self.metricsReason = metricsReason
    }

    /// A configuration problem of the app (its credentials, its project), held or failed: alarmed about,
    /// never pruned.
    public var isConfigurationAlarm: Bool {
        if case .configurationAlarm = verdict { return true }
        return false
    }

    /// The verdict shared by every service's outcome that has no answer: failed when the attempt may have
    /// reached the service (``PushTransportFailure/mayHaveReachedService``), sent again otherwise.
    public static func verdict(noAnswer failure: PushTransportFailure) -> Verdict {
        failure.mayHaveReachedService ? .failed : .retry
    }

    public var description: String {
        var parts = [service.rawValue, outcomeClass.rawValue]
        if let status { parts.append("status=\(status)") }
        if !reason.isEmpty { parts.append("reason=\(reason)") }
        if let acceptedID { parts.append("id=\(acceptedID)") }
        switch verdict {
        case .invalidate(_, let at):
            parts.append(at.map { "invalidates at=\($0.timeIntervalSince1970)" } ?? "invalidates")
        case .configurationAlarm(let held): parts.append(held ? "alarm(held)" : "alarm")
        case .delivered, .retry, .failed: break
        }
        if let notBefore { parts.append("retry-after=\(notBefore)") }
        return parts.joined(separator: " ")
    }
}
