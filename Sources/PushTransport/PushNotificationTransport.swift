/// What a service plug-in (``PushService``) hands its messages to: a client of the transport layer (APNs
/// over HTTP/2, the legacy binary interface, FCM), or a test's stand-in.
///
/// The contract is the clients': `submit` never blocks and each request's receiver is called exactly
/// once; `withdraw` takes back what was not yet written to any connection (its receivers get a
/// `cancelled` transport failure) so that a graceful stop leaves unsent work to the ledger.
public protocol PushNotificationTransport<Submission>: AnyObject, Sendable {
    /// One message to one device, with the receiver of its outcome.
    associatedtype Submission: Sendable

    /// Queues requests; returns ids usable with ``withdraw(_:)``, one per request, in order.
    @discardableResult
    func submit(_ requests: [Submission]) -> [UInt64]

    /// Takes back those of `ids` that are still queued. Returns how many were taken back.
    @discardableResult
    func withdraw(_ ids: some Sequence<UInt64>) -> Int

    /// Requests this transport can usefully have unanswered at once now: the connections it may open times
    /// the streams each may carry (the server's SETTINGS_MAX_CONCURRENT_STREAMS, capped by configuration).
    var inFlightCapacity: Int { get }
}
