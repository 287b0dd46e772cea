public import PushTransport

/// A transport to Apple: the HTTP/2 `APNsClient`, or the legacy binary interface, which answers in the
/// same vocabulary.
public protocol APNsNotificationTransport: PushNotificationTransport where Submission == APNsRequest {}
