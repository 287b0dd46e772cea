import Foundation

extension PushOutcome {
    /// APNs's answer in the dispatcher's words: 200 delivered; a rejection whose reason invalidates the
    /// device (410 `Unregistered`/`ExpiredToken`, 400 `BadDeviceToken`) invalidates it, with Apple's
    /// timestamp; other rejections fail; retryable and connection-fatal answers are retried, unless there
    /// was no answer to an attempt that may have reached APNs (failed, never resent).
    public init(apns outcome: APNsOutcome) {
        let verdict: Verdict
        switch outcome.outcomeClass {
        case .accepted:
            verdict = .delivered
        case .rejected:
            if let reason = outcome.reason, reason.invalidatesDevice {
                let at = outcome.invalidatedAtMilliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) }
                verdict = .invalidate(reason: reason, at: at)
            } else {
                verdict = .failed
            }
        case .retryable, .connectionFatal:
            if outcome.status == nil, let failure = outcome.transportFailure {
                verdict = Self.verdict(noAnswer: failure)
            } else {
                verdict = .retry
            }
        }
        self.init(
            service: .apns,
            verdict: verdict,
            outcomeClass: outcome.outcomeClass,
            status: outcome.status,
            reason: outcome.reasonLabel,
            metricsReason: Self.metricsReason(outcome)
        )
        acceptedID = outcome.apnsID
        failure = outcome.transportFailure
        configurationSignal = Self.configurationSignal(outcome)
    }

    /// `none` for an accepted answer, the APNs reason, the transport failure, or `status_N`; reasons this
    /// build does not know are `unknown`.
    static func metricsReason(_ outcome: APNsOutcome) -> String {
        if let reason = outcome.reason {
            if case .unknown = reason { return "unknown" }
            return reason.rawValue
        }
        if let failure = outcome.transportFailure { return APNsOutcome.label(failure) }
        if outcome.status == 200 { return "none" }
        return outcome.status.map { "status_\($0)" } ?? "unknown"
    }

    /// What APNs's answer says about the app's configuration (``MisconfigurationBreaker``): tokens of the
    /// other environment or of another topic, or a provider token Apple refuses; nil without an answer or
    /// for a retryable one.
    static func configurationSignal(_ outcome: APNsOutcome) -> MisconfigurationBreaker.Answer? {
        guard outcome.transportFailure == nil, outcome.status != nil else { return nil }
        switch outcome.outcomeClass {
        case .accepted: return .sane
        case .retryable, .connectionFatal: return nil
        case .rejected: break
        }
        switch outcome.reason {
        case .badDeviceToken, .badCertificateEnvironment: return .suspect(.environment)
        case .deviceTokenNotForTopic, .topicDisallowed: return .suspect(.topic)
        // Apple's answer only (a token we could not sign has no status and was excluded above).
        case .invalidProviderToken: return .suspect(.credentials)
        default: return .sane
        }
    }
}
