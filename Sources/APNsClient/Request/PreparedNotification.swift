public import NIOCore
import NIOHPACK
public import PushgateCore

/// A notification's content turned into wire form once: the header fields it shares with every
/// device it goes to, and its payload as a `ByteBuffer` that each DATA frame references without
/// copying. A broadcast to a million devices builds one of these.
public final class PreparedNotification: Sendable {
    public let content: NotificationContent
    /// The APNs headers after the pseudo-headers (`apns-push-type`, `apns-topic`, ...), indexable by
    /// HPACK: they repeat on every request, so after the first one each costs a byte or two.
    let sharedHeaders: HPACKHeaders
    let payload: ByteBuffer

    public init(_ content: NotificationContent) {
        self.content = content
        var headers = HPACKHeaders()
        headers.reserveCapacity(8)
        for field in content.headerFields {
            switch field.name {
            case "apns-expiration", "apns-collapse-id":
                // Apple: index these the first time, send them literally afterwards. NIO's encoder cannot
                // switch per occurrence, and a request's values usually repeat across its devices, so
                // indexing them is the better half of that advice for fan-out.
                headers.add(name: field.name, value: field.value, indexing: .indexable)
            default:
                headers.add(name: field.name, value: field.value, indexing: .indexable)
            }
        }
        self.sharedHeaders = headers
        self.payload = ByteBuffer(bytes: content.payload.bytes)
    }
}

/// Receives the outcome of each request submitted to an `APNsClient`.
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

    public init(
        notification: PreparedNotification, deviceToken: DeviceToken, apnsID: APNsID? = nil, tag: UInt64 = 0,
        receiver: any APNsOutcomeReceiver, deadline: NIODeadline? = nil
    ) {
        self.notification = notification
        self.deviceToken = deviceToken
        self.apnsID = apnsID
        self.tag = tag
        self.receiver = receiver
        self.deadline = deadline
    }
}

/// A request inside the pool: the caller's request plus the pool's bookkeeping.
struct PooledRequest: PoolableRequest {
    var request: APNsRequest
    let poolRequestID: UInt64
    let deadline: NIODeadline
    /// Times it was written to a connection without APNs processing it (retried transparently).
    var unprocessedAttempts: Int = 0
    /// Whether it was already resent once after `ExpiredProviderToken`.
    var retriedAfterExpiredToken = false
    /// Whether it was already resent once after a connection-fatal answer (`Shutdown`, `IdleTimeout`...).
    var retriedAfterConnectionFatal = false

    func complete(_ outcome: APNsOutcome) {
        request.receiver.receive(outcome, for: request)
    }
}
