import APNsHTTP2
import FCMTransport
import Foundation
import PushTransport
import PushgateCore
import Synchronization

/// A stored request in the forms its services take, built once (a request is immutable) and kept for
/// the chunks and retries that follow.
struct PreparedRequest: Sendable {
    let request: NotificationRequest
    /// The APNs notification: headers and payload, encoded once.
    let notification: PreparedNotification
    /// The FCM message, derived once; nil when the app has no FCM transport (nothing to derive it for).
    /// A request whose FCM message cannot be built fails its FCM devices only.
    let fcmMessage: Result<FCMMessage, ValidationError>?
    /// ``fcmMessage(sentAt:)``'s last message, for the second it was derived for.
    private let sendTimeMessage = SendTimeMessage()

    init(
        request: NotificationRequest,
        notification: PreparedNotification,
        fcmMessage: Result<FCMMessage, ValidationError>?
    ) {
        self.request = request
        self.notification = notification
        self.fcmMessage = fcmMessage
    }

    /// The FCM message to send at `now`. With an expiration time, its `android.ttl` is what is left
    /// then (floored at 0, like APNs treating a past `apns-expiration` as "now or never"): a retry sent
    /// late does not carry the TTL the request started with. Derived again at most once a second.
    /// Expired requests are stopped by the store's sweep (`expireOverdue`, due 1 ms after the
    /// expiration), as for APNs; a send racing the sweep goes out with `0s`.
    func fcmMessage(sentAt now: Date) -> Result<FCMMessage, ValidationError>? {
        guard case .success? = fcmMessage, case .at = request.expiration else { return fcmMessage }
        let second = Int64(now.timeIntervalSince1970.rounded(.down))
        if let cached = sendTimeMessage.last.withLock({ $0 }), cached.second == second { return cached.message }
        let request = self.request
        let message = Result { () throws(ValidationError) in try FCMMessage(request: request, sentAt: now) }
        sendTimeMessage.last.withLock { $0 = (second, message) }
        return message
    }

    private final class SendTimeMessage: Sendable {
        let last = Mutex<(second: Int64, message: Result<FCMMessage, ValidationError>)?>(nil)
    }
}

/// One batch of sends through one app's route, split by each device's service: APNs devices become
/// `APNsRequest`s for `route.transport`, FCM devices `FCMSendRequest`s for `route.fcm`. Devices that
/// cannot be sent (FCM devices of an app without FCM credentials, or of a request whose FCM message
/// cannot be built) are set apart with the reason they fail for, so that they never wait for a
/// service that is not there and never hold up the others.
struct RoutedSends {
    struct Unsendable {
        var tag: UInt64
        var token: DeviceToken
        var reason: String
    }

    private(set) var apns: [APNsRequest] = []
    private(set) var fcm: [FCMSendRequest] = []
    private(set) var unsendable: [Unsendable] = []

    init(reservingCapacity count: Int = 0) {
        apns.reserveCapacity(count)
    }

    /// Requests handed to transports by ``submit(to:)``: their outcomes are awaited.
    var sendCount: Int { apns.count + fcm.count }

    mutating func add(
        _ token: DeviceToken,
        tag: UInt64,
        prepared: PreparedRequest,
        route: DeliveryRoute,
        receiver: OutcomeCollector,
        now: Date
    ) {
        switch token.platform {
        case .apns:
            apns.append(
                APNsRequest(notification: prepared.notification, deviceToken: token, tag: tag, receiver: receiver)
            )
        case .fcm:
            switch (route.fcm, prepared.fcmMessage(sentAt: now)) {
            case (.some, .success(let message)?):
                fcm.append(FCMSendRequest(message: message, token: token.value, tag: tag, receiver: receiver))
            case (.some, .failure?):
                unsendable.append(Unsendable(tag: tag, token: token, reason: OutcomeDisposition.fcmInvalidMessage))
            case (.none, _), (.some, .none):
                unsendable.append(Unsendable(tag: tag, token: token, reason: OutcomeDisposition.fcmNotConfigured))
            }
        }
    }

    /// Hands the requests to the route's transports. Returns each transport's ids, for `withdraw`.
    func submit(to route: DeliveryRoute) -> (apns: [UInt64], fcm: [UInt64]) {
        let apnsIDs = apns.isEmpty ? [] : route.transport.submit(apns)
        let fcmIDs = fcm.isEmpty ? [] : (route.fcm?.submit(fcm) ?? [])
        return (apnsIDs, fcmIDs)
    }
}
