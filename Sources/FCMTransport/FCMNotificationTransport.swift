/// What a dispatcher hands FCM messages to: the FCM send plug-in's pool (HTTP/2 to
/// `fcm.googleapis.com`), with the same contract as `NotificationTransport` has for APNs.
///
/// `submit` never blocks and each message's receiver is called exactly once; `withdraw` takes back
/// what was not yet written to any connection (its receivers get a `cancelled` transport failure).
public protocol FCMNotificationTransport: AnyObject, Sendable {
    /// Queues messages; returns ids usable with ``withdraw(_:)``, one per message, in order.
    @discardableResult
    func submit(_ requests: [FCMSendRequest]) -> [UInt64]

    /// Takes back those of `ids` that are still queued. Returns how many were taken back.
    @discardableResult
    func withdraw(_ ids: some Sequence<UInt64>) -> Int

    /// Messages this transport can usefully have unanswered at once now: the connections it may open times
    /// the streams each may carry (the server's SETTINGS_MAX_CONCURRENT_STREAMS, capped by configuration).
    var inFlightCapacity: Int { get }
}
