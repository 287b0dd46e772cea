import APNsTransport
import FCMTransport
import PushTransport
import PushgateCore
import PushgateDispatch

extension DeliveryRoute {
    /// An app's route as the gateway registers it: its APNs transport and topic, and its FCM transport if
    /// it has one.
    init(transport: any APNsNotificationTransport, topic: Topic, fcm: (any FCMNotificationTransport)? = nil) {
        var services: [any PushService] = [APNsPushService(transport: transport, topic: topic)]
        if let fcm { services.append(FCMPushService(transport: fcm)) }
        self.init(services: services)
    }
}
