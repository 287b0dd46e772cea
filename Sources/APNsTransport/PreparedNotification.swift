public import NIOCore
public import PushgateCore

/// A notification's content turned into wire form once: the header fields it shares with every
/// device it goes to, and its payload as a `ByteBuffer` that each DATA frame copies from. A broadcast
/// to a million devices builds one of these; each connection encodes its header fields once (HPACK,
/// see `HPACKRequestEncoder`) and reuses the bytes for every device.
public final class PreparedNotification: Sendable {
    public let content: NotificationContent
    /// The APNs headers after the pseudo-headers (`apns-push-type`, `apns-topic`, ...), in order.
    package let headerFields: [(name: String, value: String)]
    package let payload: ByteBuffer

    public init(_ content: NotificationContent) {
        self.content = content
        self.headerFields = content.headerFields
        self.payload = ByteBuffer(bytes: content.payload.bytes)
    }
}

/// Receives the outcome of each request submitted to a `APNsNotificationTransport`.
///
/// Called exactly once per request, on an event-loop thread: it must not block. A dispatcher sending
/// a million notifications uses one receiver for all of them and tells them apart by `tag`, so that
/// no per-request closure is allocated.
public protocol APNsOutcomeReceiver: AnyObject, Sendable {
    func receive(_ outcome: APNsOutcome, for request: APNsRequest)
}

/// One notification to one device.
public struct APNsRequest: Sendable {
    public let notification: PreparedNotification
    public let deviceToken: DeviceToken
    /// Sent as `apns-id` when set; APNs makes one up otherwise.
    public let apnsID: APNsID?
    /// The caller's correlation value, handed back with the outcome.
    public let tag: UInt64
    public let receiver: any APNsOutcomeReceiver
    /// When the client gives up on it. Nil: the client's configured request timeout from submission.
    public var deadline: NIODeadline?
    /// Sent by the pool's express lane: a notification that must not wait behind a broadcast.
    public var isExpress: Bool

    public init(
        notification: PreparedNotification,
        deviceToken: DeviceToken,
        apnsID: APNsID? = nil,
        tag: UInt64 = 0,
        receiver: any APNsOutcomeReceiver,
        deadline: NIODeadline? = nil,
        isExpress: Bool = false
    ) {
        self.notification = notification
        self.deviceToken = deviceToken
        self.apnsID = apnsID
        self.tag = tag
        self.receiver = receiver
        self.deadline = deadline
        self.isExpress = isExpress
    }
}
