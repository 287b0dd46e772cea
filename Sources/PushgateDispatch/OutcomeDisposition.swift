import Foundation
import PushgateCore

/// What the ledger must record for one device's outcome: the decision, pure, from the outcome, the
/// retry policy and the time. (410 and BadDeviceToken also invalidate the device.)
enum OutcomeDisposition: Equatable {
    case accepted(apnsID: String?)
    case failed(reason: String, status: Int?, invalidation: DeviceInvalidation?)
    case retry(at: Date, reason: String)

    static func decide(
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
            switch policy.decide(
                after: outcome.outcomeClass,
                attempt: attempt,
                expiration: request.expiration,
                firstAttemptAt: request.createdAt,
                now: now,
                using: &generator
            )
            {
            case .retry(let delay):
                return .retry(
                    at: now.addingTimeInterval(
                        Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
                    ),
                    reason: outcome.reasonLabel
                )
            case .giveUp:
                return .failed(reason: outcome.reasonLabel, status: outcome.status, invalidation: nil)
            }
        }
    }
}
