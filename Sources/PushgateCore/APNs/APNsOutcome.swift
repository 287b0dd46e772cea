/// Why a request got no answer from APNs. These never come from APNs itself; they describe what
/// happened on our side of the wire.
public enum APNsTransportFailure: Hashable, Sendable, CustomStringConvertible {
    /// APNs sent GOAWAY and the stream was above its last stream id: APNs never processed it.
    case goAway
    /// The stream was reset with REFUSED_STREAM: APNs never processed it.
    case streamRefused
    /// APNs answered `ExpiredProviderToken`: the request was resent with a fresh token (and failed with
    /// this when its resends were spent).
    case expiredProviderToken
    /// The stream was reset by the server for another reason (HTTP/2 error code name).
    case streamReset(String)
    /// The connection closed before the answer arrived. APNs may or may not have processed it.
    case connectionLost
    /// No connection could be established (DNS, TCP or TLS). The message is safe to log.
    case connectFailed(String)
    /// The request's deadline passed while it waited to be written: it was never sent.
    case deadlineExceeded
    /// The request was written but its answer did not come within its deadline; its stream was reset
    /// and freed. The service may or may not have processed it.
    case answerTimeout
    /// The caller cancelled the request.
    case cancelled
    /// The client is shutting down.
    case shutdown
    /// The transport's queue was full: not sent; submit it again later (push-back, never queued).
    case queueFull
    /// The answer was not a valid APNs response (no `:status`, unparseable body).
    case malformedResponse(String)

    public var description: String {
        switch self {
        case .goAway: "goaway"
        case .streamRefused: "stream_refused"
        case .expiredProviderToken: "expired_provider_token"
        case .streamReset(let code): "stream_reset(\(code))"
        case .connectionLost: "connection_lost"
        case .connectFailed(let why): "connect_failed(\(why))"
        case .deadlineExceeded: "deadline_exceeded"
        case .answerTimeout: "answer_timeout"
        case .cancelled: "cancelled"
        case .shutdown: "shutdown"
        case .queueFull: "queue_full"
        case .malformedResponse(let why): "malformed_response(\(why))"
        }
    }

    /// A short bounded label for metrics and reports (no free text).
    public var label: String {
        switch self {
        case .goAway: "goaway"
        case .streamRefused: "stream_refused"
        case .expiredProviderToken: "expired_provider_token"
        case .streamReset: "stream_reset"
        case .connectionLost: "connection_lost"
        case .connectFailed: "connect_failed"
        case .deadlineExceeded: "deadline_exceeded"
        case .answerTimeout: "answer_timeout"
        case .cancelled: "cancelled"
        case .shutdown: "shutdown"
        case .queueFull: "queue_full"
        case .malformedResponse: "malformed_response"
        }
    }
}

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
    public var transportFailure: APNsTransportFailure?

    public init(
        outcomeClass: OutcomeClass,
        status: Int? = nil,
        reason: APNsReason? = nil,
        apnsID: String? = nil,
        apnsUniqueID: String? = nil,
        invalidatedAtMilliseconds: Int64? = nil,
        transportFailure: APNsTransportFailure? = nil
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
    public static func failed(_ failure: APNsTransportFailure) -> APNsOutcome {
        APNsOutcome(outcomeClass: failure.isConnectionFatal ? .connectionFatal : .retryable, transportFailure: failure)
    }

    public var isAccepted: Bool { outcomeClass == .accepted }

    /// A bounded label for metrics and reports: the reason string, the transport failure label, or the status.
    public var reasonLabel: String {
        if let reason { return reason.rawValue }
        if let transportFailure { return transportFailure.label }
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
        if let transportFailure { parts.append("failure=\(transportFailure)") }
        return parts.joined(separator: " ")
    }
}

extension APNsTransportFailure {
    /// Whether the request may have reached the service and been processed although no answer says so:
    /// it was written, and nothing proves it was not processed (RFC 9113 §8.7: only REFUSED_STREAM and
    /// GOAWAY above the last stream id prove that). Sending it again may deliver it twice, so the
    /// dispatcher records it as failed instead of resending it. Everything else never left us (queued,
    /// withdrawn, no connection), or the service said it did not process it. (`cancelled` also ends a
    /// written request whose caller gave up on it, `send` cancelled; the dispatcher only ever withdraws
    /// queued ones, so for it `cancelled` means "never sent".)
    public var mayHaveReachedService: Bool {
        switch self {
        case .connectionLost, .answerTimeout, .streamReset, .malformedResponse: true
        case .goAway, .streamRefused, .expiredProviderToken, .connectFailed, .deadlineExceeded, .cancelled,
            .shutdown, .queueFull:
            false
        }
    }

    /// GOAWAY and connect failures mean the connection, not the notification, is the problem.
    public var isConnectionFatal: Bool {
        switch self {
        case .goAway, .connectFailed: true
        default: false
        }
    }
}
