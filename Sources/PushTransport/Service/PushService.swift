public import Foundation
public import Logging
public import PushgateCore

/// One push service as the dispatcher knows it: the plug-in of a service (APNs, FCM...) into the
/// dispatcher, which knows no service but through this protocol. For one app, it
///
/// 1. prepares a stored request in the service's wire form, once per request (``prepare(_:logger:)``);
/// 2. submits devices with it on the service's transport (``PreparedPush/submit(_:sentAt:to:)``), within the
///    capacity it reports (``inFlightCapacity``), and takes back what is still queued (``withdraw(_:)``);
/// 3. maps each answer onto a ``PushOutcome`` (delivered, retry, invalidate the device, configuration alarm,
///    failed), handed to the dispatcher's ``PushOutcomeReceiver``.
///
/// The services of an app are registered by the platform of the devices they serve (the registry's
/// `platform`, ``PushPlatform``): adding a service is its own target and one registration line where the
/// gateway builds each app's services.
public protocol PushService: AnyObject, Sendable {
    /// The platform of the devices this service delivers to.
    var platform: PushPlatform { get }

    /// Messages the service's transport can usefully have unanswered now (connections x streams).
    var inFlightCapacity: Int { get }

    /// The transport carrying the messages: services sharing one (apps sharing a client) count its
    /// capacity once.
    var transportID: ObjectIdentifier { get }

    /// `request` in this service's wire form, built once and kept for the request's chunks and retries.
    /// Throws when the request cannot be sent at all (nothing of it is sent, on any service); a request
    /// that only this service cannot carry returns a prepared value that sets its devices apart as
    /// unsendable, and logs why once, here.
    func prepare(_ request: NotificationRequest, logger: Logger) throws -> any PreparedPush

    /// Takes back those of `ids` (from ``PushSubmission/ids``) that no connection has written yet: each
    /// completes at once, its outcome's ``PushOutcome/failure`` `cancelled`. Returns how many.
    @discardableResult
    func withdraw(_ ids: [UInt64]) -> Int

    /// The warning the dispatcher logs (at most one per app and reason a minute) when this service's
    /// devices fail or wait for `reason`, a configuration alarm (``PushOutcome/Verdict/configurationAlarm(held:)``,
    /// or a device set apart by ``PreparedPush/submit(_:sentAt:to:)``).
    func alarmMessage(reason: String) -> String
}

/// A request prepared by its service (``PushService/prepare(_:logger:)``): what each send of it reuses.
public protocol PreparedPush: Sendable {
    /// Hands `sends` to the service's transport at `now`; each is answered exactly once through
    /// `receiver`, on an event-loop thread (the receiver must not block), except those returned as
    /// ``PushSubmission/unsendable``, which never reach the transport.
    func submit(_ sends: [PushSend], sentAt now: Date, to receiver: any PushOutcomeReceiver) -> PushSubmission
}

/// One device to send a prepared request to, and the dispatcher's tag for its outcome.
public struct PushSend: Sendable {
    public var token: DeviceToken
    public var tag: UInt64
    /// A send that must not wait behind a broadcast (a one-device request's): the transport's express
    /// lane, where it has one.
    public var isExpress: Bool

    @inlinable
    public init(token: DeviceToken, tag: UInt64, isExpress: Bool = false) {
        self.token = token
        self.tag = tag
        self.isExpress = isExpress
    }
}

/// What ``PreparedPush/submit(_:sentAt:to:)`` did with a batch of sends.
public struct PushSubmission: Sendable {
    /// The transport's ids of the sends it took, for ``PushService/withdraw(_:)``.
    public var ids: [UInt64]
    /// Sends handed to the transport: each will be answered through the receiver.
    public var submitted: Int
    /// Sends the service cannot carry (its message cannot be built for this request...), with the reason
    /// they fail for: never sent, never answered; the dispatcher fails them for good.
    public var unsendable: [UnsendablePush]

    public init(ids: [UInt64], submitted: Int, unsendable: [UnsendablePush] = []) {
        self.ids = ids
        self.submitted = submitted
        self.unsendable = unsendable
    }
}

/// A device set apart without being sent, and why (a bounded reason, recorded and alarmed about).
public struct UnsendablePush: Sendable {
    public var send: PushSend
    public var reason: String

    public init(send: PushSend, reason: String) {
        self.send = send
        self.reason = reason
    }
}

/// Receives the outcome of each send, whatever its service. Called exactly once per send that reached the
/// transport, on an event-loop thread: it must not block. One receiver serves a whole chunk of a broadcast;
/// `tag` tells the sends apart.
public protocol PushOutcomeReceiver: AnyObject, Sendable {
    func receive(_ outcome: PushOutcome, token: DeviceToken, tag: UInt64)
}
