/// Why a message got no answer from its push service (APNs, FCM...). These never come from the service
/// itself; they describe what happened on our side of the wire. Each service reads them in its own
/// vocabulary (``APNsOutcome/failed(_:)``, ``FCMOutcome/failed(_:)``).
public enum PushTransportFailure: Hashable, Sendable, CustomStringConvertible {
    /// The service sent GOAWAY and the stream was above its last stream id: the service never processed it.
    case goAway
    /// The stream was reset with REFUSED_STREAM: the service never processed it.
    case streamRefused
    /// The service refused the credential the request carried (APNs `ExpiredProviderToken`, FCM a 401
    /// refusing the access token): the request was resent with a fresh one, and failed with this when
    /// its resends were spent. Each service names it in its own words (APNs `expired_provider_token`,
    /// FCM its credential alarm `UNAUTHENTICATED`).
    case credentialRefused
    /// The stream was reset by the server for another reason (HTTP/2 error code name).
    case streamReset(String)
    /// The connection closed before the answer arrived. The service may or may not have processed it.
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
    /// The answer was not a valid response of the service (no `:status`, unparseable body).
    case malformedResponse(String)

    public var description: String {
        switch self {
        case .goAway: "goaway"
        case .streamRefused: "stream_refused"
        case .credentialRefused: "credential_refused"
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
        case .credentialRefused: "credential_refused"
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

extension PushTransportFailure {
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
        case .goAway, .streamRefused, .credentialRefused, .connectFailed, .deadlineExceeded, .cancelled,
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
