package import Foundation
package import PushgateCore

/// What the ledger must record for one device's outcome: the decision, pure, from the outcome, the
/// retry policy and the time. Both services map onto the same three decisions:
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
/// vocabulary: `UNREGISTERED` → ``APNsReason/unregistered``, `INVALID_ARGUMENT` about the registration
/// token → ``APNsReason/badDeviceToken``. Neither carries a timestamp: FCM never gives a dead token back,
/// so the device is invalidated unconditionally (as for `BadDeviceToken`).
package enum OutcomeDisposition: Equatable, Sendable {
    case accepted(apnsID: String?)
    case failed(reason: String, status: Int?, invalidation: DeviceInvalidation?)
    case retry(at: Date, reason: String)

    /// The reason recorded for FCM devices of an app that has no FCM credentials.
    package static let fcmNotConfigured = "fcm_not_configured"
    /// The reason recorded for FCM devices of a request whose FCM message cannot be built.
    package static let fcmInvalidMessage = "fcm_invalid_message"

    /// The decision for one outcome of either service (``ServiceOutcome``).
    package static func decide(
        _ outcome: some ServiceOutcome,
        token: DeviceToken,
        attempt: Int,
        request: NotificationRequest,
        policy: RetryPolicy,
        now: Date,
        using generator: inout some RandomNumberGenerator
    ) -> OutcomeDisposition {
        let facts = outcome.facts
        // Checked first: a refused access token is classed retryable by the FCM transport, which already
        // refreshed and resent once; what reaches us is the second refusal.
        if facts.isConfigurationAlarm {
            guard facts.outcomeClass != .rejected else {
                return .failed(reason: facts.label, status: facts.status, invalidation: nil)
            }
            return held(facts, attempt: attempt, request: request, policy: policy, now: now, using: &generator)
        }
        switch facts.outcomeClass {
        case .accepted:
            return .accepted(apnsID: facts.acceptedID)
        case .rejected:
            let invalidation = facts.invalidation.map {
                DeviceInvalidation(token: token, reason: $0.reason, appleTimestamp: $0.appleTimestamp)
            }
            return .failed(reason: facts.label, status: facts.status, invalidation: invalidation)
        case .retryable, .connectionFatal:
            break
        }
        if facts.mayHaveReachedService {
            return .failed(reason: facts.label, status: facts.status, invalidation: nil)
        }
        // The retry policy's decision, with the next attempt no earlier than the server's `Retry-After`
        // from now. When that lies past the notification's deadline, it is given up.
        let (reason, status) = (facts.label, facts.status)
        let decision = policy.decide(
            after: facts.outcomeClass,
            attempt: attempt,
            expiration: request.expiration,
            acceptedAt: request.createdAt,
            now: now,
            using: &generator
        )
        guard case .retry(var delay) = decision else {
            return .failed(reason: reason, status: status, invalidation: nil)
        }
        if let notBefore = facts.notBefore, notBefore > delay {
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
        _ facts: OutcomeFacts,
        attempt: Int,
        request: NotificationRequest,
        policy: RetryPolicy,
        now: Date,
        using generator: inout some RandomNumberGenerator
    ) -> OutcomeDisposition {
        let deadline = policy.deadline(for: request.expiration, acceptedAt: request.createdAt)
        guard now < deadline else { return .failed(reason: facts.label, status: facts.status, invalidation: nil) }
        var delay = policy.backoff.delay(forAttempt: attempt, using: &generator)
        if let notBefore = facts.notBefore, notBefore > delay { delay = notBefore }
        return .retry(at: min(now.addingTimeInterval(Self.timeInterval(delay)), deadline), reason: facts.label)
    }

    /// (Not `Duration.seconds`: this file is also compiled alone by the benchmarks' DispatchStepMirror,
    /// with nothing but Foundation and PushgateCore.)
    private static func timeInterval(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// What the decision reads of an outcome, whichever service gave it.
package struct OutcomeFacts: Sendable {
    package var outcomeClass: OutcomeClass
    /// The reason recorded: Apple's reason, FCM's error code, or a transport failure's label.
    package var label: String
    package var status: Int?
    /// Kept on acceptance: APNs's apns-id, FCM's message name.
    package var acceptedID: String? = nil
    /// On rejection, the device is invalidated for this reason (nil: it stays registered).
    package var invalidation: (reason: APNsReason, appleTimestamp: Date?)? = nil
    /// No retry before this long from now (the server's `Retry-After`).
    package var notBefore: Duration? = nil
    /// Failed, never retried nor invalidated, whatever the class (an FCM configuration alarm).
    package var isConfigurationAlarm = false
    /// No answer, and the attempt may have reached the service (``APNsTransportFailure/mayHaveReachedService``).
    package var mayHaveReachedService = false
}

/// An outcome the ledger decision understands.
package protocol ServiceOutcome {
    var facts: OutcomeFacts { get }
}

extension APNsOutcome: ServiceOutcome {
    package var facts: OutcomeFacts {
        var facts = OutcomeFacts(outcomeClass: outcomeClass, label: reasonLabel, status: status, acceptedID: apnsID)
        facts.mayHaveReachedService = status == nil && transportFailure?.mayHaveReachedService == true
        if let reason, reason.invalidatesDevice {
            let appleTime = invalidatedAtMilliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) }
            facts.invalidation = (reason, appleTime)
        }
        return facts
    }
}

/// FCM invalidations carry the APNs reason of the same meaning and no timestamp (see ``OutcomeDisposition``).
extension FCMOutcome: ServiceOutcome {
    package var facts: OutcomeFacts {
        var facts = OutcomeFacts(outcomeClass: outcomeClass, label: reasonLabel, status: status)
        facts.acceptedID = messageName
        if invalidatesDevice {
            facts.invalidation = (errorCode == .unregistered ? .unregistered : .badDeviceToken, nil)
        }
        facts.notBefore = retryAfter
        facts.isConfigurationAlarm = isConfigurationAlarm
        facts.mayHaveReachedService = status == nil && transportFailure?.mayHaveReachedService == true
        return facts
    }
}
