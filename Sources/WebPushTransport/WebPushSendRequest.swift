public import NIOCore
public import PushTransport
public import PushgateCore
public import WebPush

/// Receives the outcome of each message submitted to a ``WebPushClient``.
///
/// Called exactly once per message, on an event-loop thread: it must not block. One receiver serves a
/// whole batch; `tag` tells the messages apart.
public protocol WebPushOutcomeReceiver: AnyObject, Sendable {
    func receive(_ outcome: WebPushOutcome, for request: WebPushSendRequest)
}

/// What became of one message: the push service's answer, or why there was none.
public enum WebPushOutcome: Hashable, Sendable {
    /// The push service answered (`WebPushAnswer.classify` of its status and `Retry-After`).
    case answered(WebPushAnswer)
    /// No answer: never written, or written and not answered.
    case failed(PushTransportFailure)
}

/// One encrypted message to one subscription: what a ``WebPushClient`` carries. The body is encrypted
/// for the subscription already (``WebPushEncryption``); the client adds the origin's VAPID header.
public struct WebPushSendRequest: Sendable, TransportSubmission {
    /// The push resource: the subscription's origin (which pool) and path.
    public let origin: WebPushOrigin
    public let path: String
    /// `TTL`, `Urgency`, `Topic`.
    public let headers: WebPushHeaders
    /// The `aes128gcm` body.
    public let body: ByteBuffer
    /// The device the message is for, handed back with the outcome.
    public let token: DeviceToken
    /// The caller's correlation value, handed back with the outcome.
    public let tag: UInt64
    public let receiver: any WebPushOutcomeReceiver
    /// When the transport gives up on it. Nil: the configured request timeout from submission.
    public var deadline: NIODeadline?

    /// - Parameter token: the device token the caller holds (the dispatcher's send, as stored: the outcome
    ///   names that device), or nil to make it from the subscription (two base64url encodings and a string,
    ///   which a broadcast would pay per message).
    public init(
        subscription: WebPushSubscription,
        headers: WebPushHeaders,
        body: [UInt8],
        tag: UInt64 = 0,
        receiver: any WebPushOutcomeReceiver,
        deadline: NIODeadline? = nil,
        token: DeviceToken? = nil
    ) {
        self.origin = subscription.origin
        self.path = subscription.path
        self.headers = headers
        self.body = ByteBuffer(bytes: body)
        self.token = token ?? subscription.deviceToken
        self.tag = tag
        self.receiver = receiver
        self.deadline = deadline
    }

    public func fail(_ failure: PushTransportFailure) {
        receiver.receive(.failed(failure), for: self)
    }
}

/// A message inside an origin's pool: the caller's request plus the pool's bookkeeping.
typealias WebPushPooledRequest = PoolEntry<WebPushSendRequest, WebPushResendMarks>

/// What the plug-in remembers of a message's earlier attempts.
struct WebPushResendMarks: PoolEntryMarks {
    /// Whether it was already resent once after the origin refused its VAPID token (401/403).
    var resentAfterRefusedToken = false
}

extension PoolEntry where Submission == WebPushSendRequest {
    func complete(_ outcome: WebPushOutcome) {
        request.receiver.receive(outcome, for: request)
    }
}
