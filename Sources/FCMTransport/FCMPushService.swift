public import Foundation
public import Logging
public import PushTransport
public import PushgateCore
import Synchronization

/// FCM as a plug-in of the dispatcher (``PushService``): an app's FCM devices go to its FCM transport with
/// the message derived from the request (docs/fcm.md); each answer is read by ``PushOutcome/init(fcm:)``.
public final class FCMPushService: PushService {
    /// The reason recorded for FCM devices of a request whose FCM message cannot be built.
    public static let invalidMessage = "fcm_invalid_message"

    public let transport: any FCMNotificationTransport

    public init(transport: any FCMNotificationTransport) {
        self.transport = transport
    }

    public var platform: PushPlatform { .fcm }

    public var inFlightCapacity: Int { transport.inFlightCapacity }

    public var transportID: ObjectIdentifier { ObjectIdentifier(transport) }

    /// The FCM message, derived once. A request whose message cannot be built fails its FCM devices only
    /// (``invalidMessage``), logged here once.
    public func prepare(_ request: NotificationRequest, logger: Logger) throws -> any PreparedPush {
        let prepared = FCMPreparedMessage(request: request, transport: transport)
        if case .failure(let error) = prepared.message {
            logger.error(
                "stored request has no valid FCM message; its FCM devices fail",
                metadata: ["push.request_id": "\(request.id)", "error": "\(error)"]
            )
        }
        return prepared
    }

    public func withdraw(_ ids: [UInt64]) -> Int {
        ids.isEmpty ? 0 : transport.withdraw(ids)
    }

    public func alarmMessage(reason: String) -> String {
        switch reason {
        case FCMOutcome.credentialsRefusedLabel, "UNAUTHENTICATED":
            "FCM refused the app's credentials; its devices wait (until their request expires) and are not pruned"
        default:
            "FCM refused the app's configuration; its devices fail and are not pruned"
        }
    }
}

/// A request's FCM message, derived once, and the transport it goes to.
public struct FCMPreparedMessage: PreparedPush {
    public let request: NotificationRequest
    /// The message as derived at intake (its TTL counted from the request's creation).
    public let message: Result<FCMMessage, ValidationError>
    let transport: (any FCMNotificationTransport)?
    /// ``message(sentAt:)``'s last message, for the second it was derived for.
    private let sendTimeMessage = SendTimeMessage()

    public init(request: NotificationRequest, transport: (any FCMNotificationTransport)? = nil) {
        self.request = request
        self.message = Result { () throws(ValidationError) in try FCMMessage(request: request) }
        self.transport = transport
    }

    /// The FCM message to send at `now`. With an expiration time, its `android.ttl` is what is left
    /// then (floored at 0, like APNs treating a past `apns-expiration` as "now or never"): a retry sent
    /// late does not carry the TTL the request started with. Derived again at most once a second.
    /// Expired requests are stopped by the store's sweep (`expireOverdue`, due 1 ms after the
    /// expiration), as for APNs; a send racing the sweep goes out with `0s`.
    public func message(sentAt now: Date) -> Result<FCMMessage, ValidationError> {
        guard case .success = message, case .at = request.expiration else { return message }
        let second = Int64(now.timeIntervalSince1970.rounded(.down))
        if let cached = sendTimeMessage.last.withLock({ $0 }), cached.second == second { return cached.message }
        let request = self.request
        let message = Result { () throws(ValidationError) in try FCMMessage(request: request, sentAt: now) }
        sendTimeMessage.last.withLock { $0 = (second, message) }
        return message
    }

    public func submit(_ sends: [PushSend], sentAt now: Date, to receiver: any PushOutcomeReceiver) -> PushSubmission {
        guard let transport, case .success(let message) = message(sentAt: now) else {
            return PushSubmission(
                ids: [],
                submitted: 0,
                unsendable: sends.map { UnsendablePush(send: $0, reason: FCMPushService.invalidMessage) }
            )
        }
        let forwarder = FCMOutcomeForwarder(receiver)
        var requests: [FCMSendRequest] = []
        requests.reserveCapacity(sends.count)
        for send in sends {
            requests.append(
                FCMSendRequest(message: message, token: send.token.value, tag: send.tag, receiver: forwarder)
            )
        }
        return PushSubmission(ids: transport.submit(requests), submitted: requests.count)
    }

    private final class SendTimeMessage: Sendable {
        let last = Mutex<(second: Int64, message: Result<FCMMessage, ValidationError>)?>(nil)
    }
}

/// Hands FCM's answers to the dispatcher's receiver in its words. One per submitted batch.
final class FCMOutcomeForwarder: FCMOutcomeReceiver {
    let receiver: any PushOutcomeReceiver

    init(_ receiver: any PushOutcomeReceiver) {
        self.receiver = receiver
    }

    func receive(_ outcome: FCMOutcome, for request: FCMSendRequest) {
        let token: DeviceToken
        do {
            token = try DeviceToken(fcm: request.token)
        } catch {
            // The plug-in hands the transport the value of a valid DeviceToken.
            preconditionFailure("FCM transport answered for a token it was not given")
        }
        receiver.receive(PushOutcome(fcm: outcome), token: token, tag: request.tag)
    }
}
