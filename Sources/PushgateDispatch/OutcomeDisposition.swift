package import Foundation
package import PushgateCore

/// What the ledger must record for one device's outcome: the decision, pure, from the outcome, the
/// retry policy and the time. Both services map onto the same three decisions:
///
/// - accepted: APNs 200; FCM 200 (its message `name` is kept where the apns-id goes);
/// - failed, device invalidated: APNs 410 `Unregistered`/`ExpiredToken`, 400 `BadDeviceToken`; FCM 404
///   `UNREGISTERED`, 400 `INVALID_ARGUMENT` about the registration token;
/// - failed: other rejections (FCM `SENDER_ID_MISMATCH`, other 4xx);
/// - failed, never invalidated, never retried (a configuration alarm): FCM `THIRD_PARTY_AUTH_ERROR`, an
///   access token refused again after the transport's one refresh;
/// - retry: 429, 5xx, no answer (FCM `QUOTA_EXCEEDED`, `UNAVAILABLE`, `INTERNAL`: no earlier than
///   `Retry-After`).
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

    package static func decide(
        _ outcome: APNsOutcome,
        token: DeviceToken,
        attempt: Int,
        request: NotificationRequest,
        policy: RetryPolicy,
        now: Date,
        using generator: inout some RandomNumberGenerator
    ) -> OutcomeDisposition {
        switch outcome.outcomeClass {
        case .accepted:
            return .accepted(apnsID: outcome.apnsID)
        case .rejected:
            var invalidation: DeviceInvalidation? = nil
            if let reason = outcome.reason, reason.invalidatesDevice {
                let appleTime = outcome.invalidatedAtMilliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) }
                invalidation = DeviceInvalidation(token: token, reason: reason, appleTimestamp: appleTime)
            }
            return .failed(reason: outcome.reasonLabel, status: outcome.status, invalidation: invalidation)
        case .retryable, .connectionFatal:
            return retryOrGiveUp(
                after: outcome.outcomeClass,
                notBefore: nil,
                reason: outcome.reasonLabel,
                status: outcome.status,
                attempt: attempt,
                request: request,
                policy: policy,
                now: now,
                using: &generator
            )
        }
    }

    package static func decide(
        _ outcome: FCMOutcome,
        token: DeviceToken,
        attempt: Int,
        request: NotificationRequest,
        policy: RetryPolicy,
        now: Date,
        using generator: inout some RandomNumberGenerator
    ) -> OutcomeDisposition {
        // Checked first: a refused access token is classed retryable by the transport, which already
        // refreshed and resent once; what reaches us is the second refusal.
        if outcome.isConfigurationAlarm {
            return .failed(reason: outcome.reasonLabel, status: outcome.status, invalidation: nil)
        }
        switch outcome.outcomeClass {
        case .accepted:
            return .accepted(apnsID: outcome.messageName)
        case .rejected:
            var invalidation: DeviceInvalidation? = nil
            if outcome.invalidatesDevice {
                let reason: APNsReason = outcome.errorCode == .unregistered ? .unregistered : .badDeviceToken
                invalidation = DeviceInvalidation(token: token, reason: reason, appleTimestamp: nil)
            }
            return .failed(reason: outcome.reasonLabel, status: outcome.status, invalidation: invalidation)
        case .retryable, .connectionFatal:
            return retryOrGiveUp(
                after: outcome.outcomeClass,
                notBefore: outcome.retryAfter,
                reason: outcome.reasonLabel,
                status: outcome.status,
                attempt: attempt,
                request: request,
                policy: policy,
                now: now,
                using: &generator
            )
        }
    }

    /// The retry policy's decision, with the next attempt no earlier than `notBefore` from now (the
    /// server's `Retry-After`). When that lies past the notification's deadline, it is given up.
    private static func retryOrGiveUp(
        after outcomeClass: OutcomeClass,
        notBefore: Duration?,
        reason: String,
        status: Int?,
        attempt: Int,
        request: NotificationRequest,
        policy: RetryPolicy,
        now: Date,
        using generator: inout some RandomNumberGenerator
    ) -> OutcomeDisposition {
        let decision = policy.decide(
            after: outcomeClass,
            attempt: attempt,
            expiration: request.expiration,
            firstAttemptAt: request.createdAt,
            now: now,
            using: &generator
        )
        guard case .retry(var delay) = decision else {
            return .failed(reason: reason, status: status, invalidation: nil)
        }
        if let notBefore, notBefore > delay {
            let deadline = policy.deadline(for: request.expiration, firstAttemptAt: request.createdAt)
            guard now.addingTimeInterval(Self.timeInterval(notBefore)) <= deadline else {
                return .failed(reason: reason, status: status, invalidation: nil)
            }
            delay = notBefore
        }
        return .retry(at: now.addingTimeInterval(Self.timeInterval(delay)), reason: reason)
    }

    /// (Not `Duration.seconds`: this file is also compiled alone by the benchmarks' DispatchStepMirror,
    /// with nothing but Foundation and PushgateCore.)
    private static func timeInterval(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
