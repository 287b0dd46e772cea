import Foundation
public import Logging
public import PushTransport
public import PushgateCore

/// APNs as a plug-in of the dispatcher (``PushService``): an app's APNs devices go to its transport (the
/// HTTP/2 `APNsClient`, or the legacy binary interface) with its topic; each answer is read by
/// ``PushOutcome/init(apns:)``.
public final class APNsPushService: PushService {
    public let transport: any APNsNotificationTransport
    public let topic: Topic

    public init(transport: any APNsNotificationTransport, topic: Topic) {
        self.transport = transport
        self.topic = topic
    }

    public var platform: PushPlatform { .apns }

    public var inFlightCapacity: Int { transport.inFlightCapacity }

    public var transportID: ObjectIdentifier { ObjectIdentifier(transport) }

    /// The notification's headers and payload, encoded once. A request APNs cannot carry (its content
    /// invalid for the topic) is not sent at all.
    public func prepare(_ request: NotificationRequest, logger: Logger) throws -> any PreparedPush {
        let content = try NotificationContent(
            topic: topic,
            pushType: request.pushType,
            priority: request.priority,
            expiration: request.expiration,
            collapseID: request.collapseID,
            payload: request.payload
        )
        return APNsPreparedPush(notification: PreparedNotification(content), transport: transport)
    }

    public func withdraw(_ ids: [UInt64]) -> Int {
        ids.isEmpty ? 0 : transport.withdraw(ids)
    }

    public func alarmMessage(reason: String) -> String {
        "APNs refused the app's configuration; its devices are not pruned"
    }
}

/// A request's APNs notification, and the transport it goes to.
struct APNsPreparedPush: PreparedPush {
    let notification: PreparedNotification
    let transport: any APNsNotificationTransport

    func submit(_ sends: [PushSend], sentAt now: Date, to receiver: any PushOutcomeReceiver) -> PushSubmission {
        let forwarder = APNsOutcomeForwarder(receiver)
        var requests: [APNsRequest] = []
        requests.reserveCapacity(sends.count)
        for send in sends {
            requests.append(
                APNsRequest(
                    notification: notification,
                    deviceToken: send.token,
                    tag: send.tag,
                    receiver: forwarder,
                    isExpress: send.isExpress
                )
            )
        }
        return PushSubmission(ids: transport.submit(requests), submitted: requests.count)
    }
}

/// Hands APNs's answers to the dispatcher's receiver in its words. One per submitted batch.
final class APNsOutcomeForwarder: APNsOutcomeReceiver {
    let receiver: any PushOutcomeReceiver

    init(_ receiver: any PushOutcomeReceiver) {
        self.receiver = receiver
    }

    func receive(_ outcome: APNsOutcome, for request: APNsRequest) {
        receiver.receive(PushOutcome(apns: outcome), token: request.deviceToken, tag: request.tag)
    }
}
