package import Foundation
package import PushgateCore

/// What the ledger must record for one device's outcome: the decision, pure, from the outcome (a
/// ``PushOutcome``, which every service maps its answers onto), the retry policy and the time. Every
/// service's outcomes come down to the same three decisions; APNs and FCM map as follows:
///
/// - accepted: APNs 200; FCM 200 (its message `name` is kept where the apns-id goes);
/// - failed, device invalidated: APNs 410 `Unregistered`/`ExpiredToken`, 400 `BadDeviceToken`; FCM 404
///   `UNREGISTERED`, 400 `INVALID_ARGUMENT` about the registration token;
/// - failed: other rejections (FCM `SENDER_ID_MISMATCH`, other 4xx);
/// - failed, never invalidated, never retried (a configuration alarm FCM answered as a rejection): FCM
///   `THIRD_PARTY_AUTH_ERROR`;
/// - held, never invalidated (a configuration alarm of the app's FCM credentials: the token endpoint refused
///   them, or FCM refused an access token again after the transport's one refresh): retried no earlier
///   than the next token fetch (and the back-off), until the request's deadline; past it, failed with the
///   alarm's reason (`fcm_credentials_refused`, `UNAUTHENTICATED`). An outage never fails a device;
/// - retry: 429, 5xx (FCM `QUOTA_EXCEEDED`, `UNAVAILABLE`, `INTERNAL`: no earlier than `Retry-After`),
///   and no answer when the attempt never reached the service (still queued at its deadline, no
///   connection, a refused stream, GOAWAY above it);
/// - failed, never resent: no answer to an attempt that may have reached the service (`connection_lost`,
///   `answer_timeout`, `stream_reset`, `malformed_response`). The service may have accepted it, and a
///   resend would deliver it twice: a resend only follows evidence that the attempt did not get there.
///
/// FCM invalidations are recorded with the APNs reason of the same meaning, so the registry keeps one
/// vocabulary (``PushOutcome/init(fcm:)``): `UNREGISTERED` → ``APNsReason/unregistered``, `INVALID_ARGUMENT`
/// about the registration token → ``APNsReason/badDeviceToken``. Neither carries a timestamp: FCM never
/// gives a dead token back, so the device is invalidated unconditionally (as for `BadDeviceToken`).
package enum OutcomeDisposition: Equatable, Sendable {
    case accepted(apnsID: String?)
    case failed(reason: String, status: Int?, invalidation: DeviceInvalidation?)
    case retry(at: Date, reason: String)

    /// The reason recorded for devices of a platform the app has no service for (`fcm_not_configured`
    /// for the FCM devices of an app without FCM credentials).
    package static func notConfigured(_ platform: PushPlatform) -> String { "\(platform.rawValue)_not_configured" }

    /// The decision for one outcome, whichever service gave it.
    package static func decide(
        _ outcome: PushOutcome,
        token: DeviceToken,
        attempt: Int,
        request: NotificationRequest,
        policy: RetryPolicy,
        now: Date,
        using generator: inout some RandomNumberGenerator
    ) -> OutcomeDisposition {
        let (reason, status) = (outcome.reason, outcome.status)
        switch outcome.verdict {
        case .delivered:
            return .accepted(apnsID: outcome.acceptedID)
        case .invalidate(let invalidationReason, let at):
            let invalidation = DeviceInvalidation(token: token, reason: invalidationReason, appleTimestamp: at)
            return .failed(reason: reason, status: status, invalidation: invalidation)
        case .failed, .configurationAlarm(held: false):
            return .failed(reason: reason, status: status, invalidation: nil)
        case .configurationAlarm(held: true):
            // An FCM access token refused is classed retryable by its transport, which already refreshed
            // and resent once: what reaches us is the second refusal, held here, not retried as an outage.
            return held(outcome, attempt: attempt, request: request, policy: policy, now: now, using: &generator)
        case .retry:
            break
        }
        // The retry policy's decision, with the next attempt no earlier than the server's `Retry-After`
        // from now. When that lies past the notification's deadline, it is given up.
        let decision = policy.decide(
            after: outcome.outcomeClass,
            attempt: attempt,
            expiration: request.expiration,
            acceptedAt: request.createdAt,
            now: now,
            using: &generator
        )
        guard case .retry(var delay) = decision else {
            return .failed(reason: reason, status: status, invalidation: nil)
        }
        if let notBefore = outcome.notBefore, notBefore > delay {
            let deadline = policy.deadline(for: request.expiration, acceptedAt: request.createdAt)
            guard now.addingTimeInterval(Self.timeInterval(notBefore)) <= deadline else {
                return .failed(reason: reason, status: status, invalidation: nil)
            }
            delay = notBefore
        }
        return .retry(at: now.addingTimeInterval(Self.timeInterval(delay)), reason: reason)
    }

    /// A device held for its app's credentials: retried after the back-off of `attempt`, and no earlier
    /// than `notBefore` (the next token fetch), but never past the request's deadline; once that has
    /// passed, failed with the alarm's reason. Attempts are not counted: it was not sent.
    private static func held(
        _ outcome: PushOutcome,
        attempt: Int,
        request: NotificationRequest,
        policy: RetryPolicy,
        now: Date,
        using generator: inout some RandomNumberGenerator
    ) -> OutcomeDisposition {
        let deadline = policy.deadline(for: request.expiration, acceptedAt: request.createdAt)
        guard now < deadline else {
            return .failed(reason: outcome.reason, status: outcome.status, invalidation: nil)
        }
        var delay = policy.backoff.delay(forAttempt: attempt, using: &generator)
        if let notBefore = outcome.notBefore, notBefore > delay { delay = notBefore }
        return .retry(at: min(now.addingTimeInterval(Self.timeInterval(delay)), deadline), reason: outcome.reason)
    }

    private static func timeInterval(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
