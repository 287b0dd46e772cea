/// What became of one notification sent to one device: APNs' answer, or why there was none.
public struct APNsOutcome: Hashable, Sendable, CustomStringConvertible {
    public var outcomeClass: OutcomeClass
    /// The HTTP status APNs answered with; nil when there was no answer.
    public var status: Int?
    public var reason: APNsReason?
    /// `apns-id` of the answer (APNs echoes ours or makes one up).
    public var apnsID: String?
    /// `apns-unique-id`: only the development environment sends it (for the Push Notifications Console).
    public var apnsUniqueID: String?
    /// For 410: when APNs confirmed the token was no longer valid, in milliseconds since 1970.
    public var invalidatedAtMilliseconds: Int64?
    /// Set when there was no answer from APNs.
    public var transportFailure: PushTransportFailure?

    public init(
        outcomeClass: OutcomeClass,
        status: Int? = nil,
        reason: APNsReason? = nil,
        apnsID: String? = nil,
        apnsUniqueID: String? = nil,
        invalidatedAtMilliseconds: Int64? = nil,
        transportFailure: PushTransportFailure? = nil
    ) {
        self.outcomeClass = outcomeClass
        self.status = status
        self.reason = reason
        self.apnsID = apnsID
        self.apnsUniqueID = apnsUniqueID
        self.invalidatedAtMilliseconds = invalidatedAtMilliseconds
        self.transportFailure = transportFailure
    }

    /// An APNs answer, classified.
    public static func answered(
        status: Int,
        reason: APNsReason?,
        apnsID: String?,
        apnsUniqueID: String?,
        invalidatedAtMilliseconds: Int64?
    ) -> APNsOutcome {
        APNsOutcome(
            outcomeClass: APNsReason.classify(status: status, reason: reason),
            status: status,
            reason: reason,
            apnsID: apnsID,
            apnsUniqueID: apnsUniqueID,
            invalidatedAtMilliseconds: invalidatedAtMilliseconds
        )
    }

    /// No answer. Cancellation is final for the caller (rejected from its point of view is wrong, so it
    /// is classed retryable like the rest: the caller decides whether to try again).
    public static func failed(_ failure: PushTransportFailure) -> APNsOutcome {
        APNsOutcome(outcomeClass: failure.isConnectionFatal ? .connectionFatal : .retryable, transportFailure: failure)
    }

    public var isAccepted: Bool { outcomeClass == .accepted }

    /// A bounded label for metrics and reports: the reason string, the transport failure label, or the status.
    public var reasonLabel: String {
        if let reason { return reason.rawValue }
        if let transportFailure { return Self.label(transportFailure) }
        if let status { return status == 200 ? "" : "status_\(status)" }
        return "unknown"
    }

    public var description: String {
        var parts = [outcomeClass.rawValue]
        if let status { parts.append("status=\(status)") }
        if let reason { parts.append("reason=\(reason)") }
        if let apnsID { parts.append("apns-id=\(apnsID)") }
        if let apnsUniqueID { parts.append("apns-unique-id=\(apnsUniqueID)") }
        if let invalidatedAtMilliseconds { parts.append("timestamp=\(invalidatedAtMilliseconds)") }
        if let transportFailure {
            parts.append(
                "failure=\(transportFailure == .credentialRefused ? Self.label(transportFailure) : "\(transportFailure)")"
            )
        }
        return parts.joined(separator: " ")
    }
}

extension APNsOutcome {
    /// A transport failure in APNs's words: a token refused on every resend is `expired_provider_token`
    /// (Apple's `ExpiredProviderToken`, which is what refused it).
    public static func label(_ failure: PushTransportFailure) -> String {
        failure == .credentialRefused ? "expired_provider_token" : failure.label
    }
}
