public import Foundation
import PushgateCore

/// What a push service's answer to one message means (RFC 8030 §5, §6.2, RFC 8292 §4), service-neutral
/// so the dispatcher's plug-in can map it onto its outcomes.
public enum WebPushAnswer: Hashable, Sendable {
    /// 2xx (201 Created): the push service accepted the message (accepted, not yet delivered).
    case delivered
    /// 404 or 410: the subscription is gone (expired, unsubscribed): delete it; do not retry.
    case invalidateSubscription(status: Int)
    /// 400, 413 and any other 4xx or unexpected status: this message cannot be sent as it is (bad
    /// headers, too large); the subscription stays.
    case failMessage(status: Int)
    /// 429 and 5xx: try again later, not before `after` when the service said (`Retry-After`).
    case retry(status: Int, after: Duration?)
    /// 401 or 403: the push service refused our VAPID token or key. A configuration alarm for the app;
    /// never a reason to delete the subscription.
    case configurationAlarm(status: Int)

    /// Classifies an answer from its status and `Retry-After` header (delay-seconds or an HTTP-date,
    /// read against `now`).
    public static func classify(status: Int, retryAfter: String? = nil, now: Date) -> WebPushAnswer {
        switch status {
        case 200...299:
            return .delivered
        case 404, 410:
            return .invalidateSubscription(status: status)
        case 401, 403:
            return .configurationAlarm(status: status)
        case 429, 500...599:
            return .retry(status: status, after: retryAfter.flatMap { RetryAfterHeader.parse($0, now: now) })
        default:
            return .failMessage(status: status)
        }
    }
}
