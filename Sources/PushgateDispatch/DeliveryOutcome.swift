import Foundation
import PushgateCore

/// What became of one notification sent to one device, on whichever service carried it. The collector
/// gathers both kinds in one list; the ledger's decision is taken per service
/// (``OutcomeDisposition/decide(_:token:attempt:request:policy:now:using:)``).
enum DeliveryOutcome: Hashable, Sendable, CustomStringConvertible {
    case apns(APNsOutcome)
    case fcm(FCMOutcome)

    var service: PushPlatform {
        switch self {
        case .apns: .apns
        case .fcm: .fcm
        }
    }

    /// The HTTP status of the answer; nil when there was none.
    var status: Int? {
        switch self {
        case .apns(let outcome): outcome.status
        case .fcm(let outcome): outcome.status
        }
    }

    var transportFailure: APNsTransportFailure? {
        switch self {
        case .apns(let outcome): outcome.transportFailure
        case .fcm(let outcome): outcome.transportFailure
        }
    }

    /// A configuration problem of the app's FCM credentials: the device failed, but is not pruned.
    var isConfigurationAlarm: Bool {
        if case .fcm(let outcome) = self { return outcome.isConfigurationAlarm }
        return false
    }

    /// A bounded label for metrics: `none` for an accepted answer, the reason or error code, the
    /// transport failure, or `status_N`; APNs reasons this build does not know are `unknown`.
    var metricsReason: String {
        switch self {
        case .apns(let outcome):
            return OutcomeTally.reasonLabel(outcome)
        case .fcm(let outcome):
            if outcome.isAccepted { return "none" }
            if case .unknown = outcome.errorCode { return "unknown" }
            return outcome.reasonLabel
        }
    }

    var description: String {
        switch self {
        case .apns(let outcome): "apns \(outcome)"
        case .fcm(let outcome): "fcm \(outcome)"
        }
    }
}

extension DeliveryOutcome: ServiceOutcome {
    var facts: OutcomeFacts {
        switch self {
        case .apns(let apns): apns.facts
        case .fcm(let fcm): fcm.facts
        }
    }
}
