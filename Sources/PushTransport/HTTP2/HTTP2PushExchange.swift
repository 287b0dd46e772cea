public import NIOCore
public import NIOHPACK
public import PushgateCore

/// What a push service adds to ``HTTP2PushConnectionHandler``: how one request becomes a header block and
/// a body, how its answer is read and what it means. The handler owns the connection (preface, SETTINGS,
/// frames, flow control, PING, GOAWAY, deadlines); the exchange owns the service's vocabulary.
///
/// One value per connection, called on its event loop only. It is a struct (or a final class), so the
/// handler, generic over it, is specialised per service: no existential per frame.
public protocol HTTP2PushExchange: SendableMetatype {
    associatedtype Request: TransportPooledRequest
    /// What a batch of requests is written with (APNs: the provider token, if any; FCM: the access token).
    associatedtype Credential
    /// What a stream keeps: its credential and what has arrived of its answer's headers.
    associatedtype Answer
    /// What only some answers carry, kept apart so the common stream does not carry it.
    associatedtype Extra
    /// One decoded header block of an answer.
    associatedtype HeaderFields
    /// What a finished answer means for the caller.
    associatedtype Outcome

    /// Prefix of the handler's log metadata keys (`apns` gives `apns.connection_id`).
    static var metadataPrefix: String { get }
    /// Answers' bodies beyond this are dropped (a service's error body is a few hundred bytes).
    static var maximumAnswerBodyBytes: Int { get }

    /// Called once when the handler joins its channel: `wake` (callable from any thread) makes the
    /// connection pull work again, for an exchange that told it to hold off (``mayWrite()``).
    mutating func attached(wake: @escaping @Sendable () -> Void)

    /// Whether requests may be written now; false holds new streams until `wake` is called (FCM: no
    /// access token yet).
    mutating func mayWrite() -> Bool

    /// The credential for a batch just pulled; `.failed` when there is none and the exchange has
    /// completed every request of the batch itself.
    mutating func credential(for batch: [Request]) -> HTTP2PushBatchCredential<Credential>

    /// Writes the request's header block (not the frame header) and returns its body and what its
    /// stream keeps.
    mutating func writeHeaderBlock(
        of request: borrowing Request,
        credential: Credential,
        encoder: inout HPACKRequestEncoder,
        into buffer: inout ByteBuffer
    ) -> (body: ByteBuffer, answer: Answer)

    /// Decodes an answer's header block, keeping `decoder`'s table in step even for a stream no longer
    /// tracked (`tracked` false), for which it returns nil.
    mutating func decodeHeaders(
        _ block: inout ByteBuffer,
        decoder: inout HPACKDecoder,
        tracked: Bool
    ) throws -> HeaderFields?

    /// Applies decoded fields to the stream's answer; returns what goes to the stream's extras, if any.
    mutating func read(_ fields: HeaderFields, into answer: inout Answer, of request: borrowing Request) -> Extra?

    /// The answer is complete (`roundTrip` after its request was written): what it means, and whether
    /// the connection must be retired (a reason for the log) before that is carried out.
    mutating func finish(
        _ request: borrowing Request,
        answer: Answer,
        body: ByteBuffer?,
        extra: Extra?,
        roundTrip: TimeAmount
    ) -> (HTTP2PushStreamDisposition<Request, Outcome>, retireConnection: String?)

    /// Delivers an outcome to the request's receiver.
    /// (Mutating, like every requirement the handler calls per stream: a non-mutating call on the
    /// handler's stored exchange would copy it, retaining and releasing each of its references.)
    mutating func complete(_ request: borrowing Request, with outcome: Outcome)

    /// GOAWAY carried debug data; returns a reason for the log, if the service's vocabulary has one.
    mutating func goAwayReceived(debugData: ByteBuffer) -> String?

    /// The connection closed with this request written but unanswered: the service may or may not have
    /// processed it. Completes it.
    mutating func connectionLost(_ request: borrowing Request)
}

extension HTTP2PushExchange {
    public static var maximumAnswerBodyBytes: Int { Int.max }
    public mutating func attached(wake: @escaping @Sendable () -> Void) {}
    @inline(__always) public mutating func mayWrite() -> Bool { true }
}

/// The credential a batch is written with, or that there is none (the exchange completed the batch).
public enum HTTP2PushBatchCredential<Credential> {
    case write(Credential)
    case failed
}

/// What a finished stream's answer leads to.
public enum HTTP2PushStreamDisposition<Request, Outcome> {
    /// Hand the outcome to the caller.
    case complete(Outcome)
    /// Send it again (on any connection), counted against its resends.
    case requeue(Request, because: PushTransportFailure)
}

/// What a connection handler needs from its pool. `ConnectionPool` implements it; tests can too.
public protocol HTTP2PushConnectionDelegate<Request>: AnyObject, Sendable {
    associatedtype Request
    /// The first SETTINGS arrived: the connection is usable.
    func connectionReady(_ id: Int, capacity: Int)
    func connectionCapacityChanged(_ id: Int, capacity: Int)
    /// The connection takes no new work (GOAWAY, connection-fatal answer, idle, ping timeout).
    func connectionRetiring(_ id: Int)
    /// The channel closed. `everReady` false means the connection attempt failed (TLS, protocol).
    func connectionClosed(_ id: Int, everReady: Bool, error: String?)
    /// Hands back `released` finished requests and takes up to `maximum` new ones.
    func pull(connection id: Int, released: Int, maximum: Int) -> [Request]
    /// Requests the service never processed: queue them again (or fail them when their budget is spent).
    func requeue(_ requests: [Request], because failure: PushTransportFailure)
}

extension ConnectionPool: HTTP2PushConnectionDelegate {}
