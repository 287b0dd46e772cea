public import PushgateCore

extension LegacyErrorStatus {
    /// The HTTP/2 provider API's reason for the same problem, so that legacy outcomes flow into the
    /// same ledger, reports and metrics as HTTP/2 ones (the table is in `docs/legacy.md`).
    ///
    /// Invalid token (8) and invalid token size (5) are `BadDeviceToken`, which invalidates the device;
    /// invalid payload size (7) is `PayloadTooLarge`, a permanent failure. Processing error (1), "None
    /// (unknown)" (255), "No errors" (0, meaningless in an error response) and undocumented values are
    /// `InternalServerError`: temporary, retried with back-off. Shutdown (10) names no failed
    /// notification and has no reason: the sender resends what followed it.
    public var apnsReason: APNsReason? {
        switch self {
        case .processingError, .noErrors, .unknownError, .unknown: .internalServerError
        case .missingDeviceToken: .missingDeviceToken
        case .missingTopic: .missingTopic
        case .missingPayload: .payloadEmpty
        case .invalidTokenSize, .invalidToken: .badDeviceToken
        case .invalidTopicSize: .badTopic
        case .invalidPayloadSize: .payloadTooLarge
        case .protocolError: .unknown("ProtocolError")
        case .shutdown: nil
        }
    }

    /// The outcome a notification named by an error response with this status gets. The status field
    /// carries the HTTP status the provider API gives for the mapped reason (400 for `BadDeviceToken`),
    /// so reports read the same for both transports; the legacy status itself is logged.
    public var outcome: APNsOutcome {
        guard let reason = apnsReason else { return .failed(.connectionLost) }
        let outcomeClass: OutcomeClass = reason.status == nil ? .rejected : reason.outcomeClass
        return APNsOutcome(outcomeClass: outcomeClass, status: reason.status, reason: reason)
    }
}

extension APNsOutcome {
    /// A notification the legacy gateway processed without an error response (see
    /// `LegacyConnectionStateMachine` for when that is known). Carries 200, as the provider API
    /// would, so reports and metrics count it like an HTTP/2 acceptance.
    static let legacyDelivered = APNsOutcome(outcomeClass: .accepted, status: 200)
}
