extension PushOutcome {
    /// FCM's answer in the dispatcher's words: 200 delivered; `UNREGISTERED`, and `INVALID_ARGUMENT` about
    /// the registration token, invalidate the device, recorded with the APNs reason of the same meaning
    /// (``APNsReason/unregistered``, ``APNsReason/badDeviceToken``) and no timestamp, so that the registry
    /// keeps one vocabulary; other rejections fail; `THIRD_PARTY_AUTH_ERROR` is a configuration alarm that
    /// fails the device, refused credentials (the token endpoint's, or an access token refused twice) one
    /// that holds it; 429 and 5xx are retried no earlier than `Retry-After`; no answer as for every service.
    public init(fcm outcome: FCMOutcome) {
        let verdict: Verdict
        if outcome.isConfigurationAlarm {
            verdict = .configurationAlarm(held: outcome.outcomeClass != .rejected)
        } else {
            switch outcome.outcomeClass {
            case .accepted:
                verdict = .delivered
            case .rejected:
                verdict =
                    outcome.invalidatesDevice
                    ? .invalidate(reason: outcome.errorCode == .unregistered ? .unregistered : .badDeviceToken, at: nil)
                    : .failed
            case .retryable, .connectionFatal:
                if outcome.status == nil, let failure = outcome.transportFailure {
                    verdict = Self.verdict(noAnswer: failure)
                } else {
                    verdict = .retry
                }
            }
        }
        let metricsReason: String
        if outcome.isAccepted {
            metricsReason = "none"
        } else if case .unknown = outcome.errorCode {
            metricsReason = "unknown"
        } else {
            metricsReason = outcome.reasonLabel
        }
        self.init(
            service: .fcm,
            verdict: verdict,
            outcomeClass: outcome.outcomeClass,
            status: outcome.status,
            reason: outcome.reasonLabel,
            metricsReason: metricsReason
        )
        acceptedID = outcome.messageName
        notBefore = outcome.retryAfter
        failure = outcome.transportFailure
        configurationSignal = Self.configurationSignal(outcome)
    }

    /// What FCM's answer says about the app's configuration (``MisconfigurationBreaker``): tokens of another
    /// Firebase project (`SENDER_ID_MISMATCH`); nil without an answer, for a retryable one, and for a
    /// credential alarm (handled as such).
    static func configurationSignal(_ outcome: FCMOutcome) -> MisconfigurationBreaker.Answer? {
        guard outcome.transportFailure == nil, outcome.status != nil, !outcome.isConfigurationAlarm else { return nil }
        switch outcome.outcomeClass {
        case .accepted: return .sane
        case .retryable, .connectionFatal: return nil
        case .rejected: return outcome.errorCode == .senderIDMismatch ? .suspect(.project) : .sane
        }
    }
}
