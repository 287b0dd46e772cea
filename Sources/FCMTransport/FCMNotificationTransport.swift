public import PushTransport

/// A transport to FCM: the FCM send plug-in's pool (HTTP/2 to `fcm.googleapis.com`), or a test's stand-in.
public protocol FCMNotificationTransport: PushNotificationTransport where Submission == FCMSendRequest {}
