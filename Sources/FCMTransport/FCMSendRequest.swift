public import NIOCore
public import PushTransport
public import PushgateCore

/// Receives the outcome of each message submitted to the FCM transport.
///
/// Called exactly once per message, on an event-loop thread: it must not block. One receiver serves
/// a whole broadcast; `tag` tells the messages apart.
public protocol FCMOutcomeReceiver: AnyObject, Sendable {
    func receive(_ outcome: FCMOutcome, for request: FCMSendRequest)
}

/// One FCM message to one registration token: what the FCM transport's pool carries.
public struct FCMSendRequest: Sendable, TransportSubmission {
    /// Derived once per notification; addressed to `token` when it is written.
    public let message: FCMMessage
    public let token: String
    /// The caller's correlation value, handed back with the outcome.
    public let tag: UInt64
    public let receiver: any FCMOutcomeReceiver
    /// When the transport gives up on it. Nil: the configured request timeout from submission.
    public var deadline: NIODeadline?

    public init(
        message: FCMMessage,
        token: String,
        tag: UInt64 = 0,
        receiver: any FCMOutcomeReceiver,
        deadline: NIODeadline? = nil
    ) {
        self.message = message
        self.token = token
        self.tag = tag
        self.receiver = receiver
        self.deadline = deadline
    }
}

extension FCMSendRequest {
    /// No answer: classed as for APNs (GOAWAY and connect failures are connection-fatal).
    public func fail(_ failure: PushTransportFailure) {
        receiver.receive(.failed(failure), for: self)
    }
}

/// A message inside the FCM pool: the caller's request plus the pool's bookkeeping.
typealias FCMPooledRequest = PoolEntry<FCMSendRequest, FCMResendMarks>

/// What the FCM plug-in remembers of a message's earlier attempts.
struct FCMResendMarks: PoolEntryMarks {
    /// Whether it was already resent once after FCM refused the access token (401 without an FCM error code).
    var resentAfterRefusedAccessToken = false
}

extension PoolEntry where Submission == FCMSendRequest {
    func complete(_ outcome: FCMOutcome) {
        request.receiver.receive(outcome, for: request)
    }
}
