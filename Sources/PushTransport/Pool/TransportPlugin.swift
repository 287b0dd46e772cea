package import Logging
public import NIOCore
public import PushgateCore

/// What a push protocol adds to the shared transport: its codec and connection handler. The pool
/// driver (`ConnectionPool`), the TLS set-up (`TransportTLS`) and the bootstrap (`TransportBootstrap`)
/// are the same for every plug-in.
package protocol TransportPlugin: Sendable {
    associatedtype Request: TransportPooledRequest
    associatedtype Connection: PooledConnection & ChannelHandler

    /// The service as log lines name it ("APNs", "legacy gateway").
    var serviceName: String { get }

    /// Adds what goes between TLS and the connection handler on a new channel (a decoder); nothing by default.
    func addDecoders(to pipeline: ChannelPipeline.SynchronousOperations) throws

    /// The handler of a new connection (made on its event loop), which the pool adds behind TLS and the
    /// decoders and talks to. It reports to `context.pool` (ready, capacity, pull, requeue, closed).
    func makeConnection(_ context: TransportConnectionContext<Self>) -> Connection

    /// Called before the pool opens connection `id`: the plug-in calls `open` when the connection may be
    /// made, at once by default. A plug-in whose pools share a cap on connections (Web Push: one pool per
    /// origin, a cap overall) holds `open` until a slot is free; the pool sees a slow connect meanwhile.
    /// Every admitted connection is handed back through ``connectionEnded(id:)`` once it is gone.
    func admitConnection(id: Int, open: @escaping @Sendable () -> Void)
    /// Connection `id` is closed, or could not be made: its slot is free.
    func connectionEnded(id: Int)

    /// Hooks for the plug-in's metrics; no-ops by default.
    func connectionOpened()
    func connectionFailed()
    func sampled(queued: Int, inFlight: Int, connections: Int, activeConnections: Int)
}

extension TransportPlugin {
    package func addDecoders(to pipeline: ChannelPipeline.SynchronousOperations) throws {}
    package func admitConnection(id: Int, open: @escaping @Sendable () -> Void) { open() }
    package func connectionEnded(id: Int) {}
    package func connectionOpened() {}
    package func connectionFailed() {}
    package func sampled(queued: Int, inFlight: Int, connections: Int, activeConnections: Int) {}
}

/// What the pool gives a plug-in to make a connection's handler with: the handler's id and its pool, and
/// what the pool already knows (tick, logger, the time it connected).
package struct TransportConnectionContext<Plugin: TransportPlugin> {
    package let id: Int
    package let pool: ConnectionPool<Plugin>
    /// How often deadlines (and pings, idleness, confirmations) are checked.
    package let tickInterval: TimeAmount
    package let logger: Logger
    package let now: NIODeadline
}

/// A connection handler as the pool sees it. Called on the connection's event loop.
public protocol PooledConnection: AnyObject {
    /// There is queued work and the connection was parked: pull some.
    func wake()
    /// Take nothing new, finish what is held, then close.
    func closeGracefully()
    /// Drop a request the connection holds, if it can; true if it held it.
    func cancel(poolRequestID: UInt64) -> Bool
}

extension PooledConnection {
    public func cancel(poolRequestID: UInt64) -> Bool { false }
}

/// What a caller hands a transport's pool: one message to one device, for any push service.
public protocol TransportSubmission: Sendable {
    /// When the pool gives up on it. Nil: the pool's configured request timeout from submission.
    var deadline: NIODeadline? { get }
    /// Goes by the pool's express lane (``PoolableRequest/isExpress``).
    var isExpress: Bool { get }
    /// Completes it without an answer (cancelled, shut down, deadline, connect failure...) through its
    /// own receiver.
    func fail(_ failure: PushTransportFailure)
}

/// A request inside a transport's pool: the caller's submission plus the plug-in's bookkeeping. The
/// pool is generic over it: it only reads deadlines, counts resends and fails requests it could not
/// hand to any connection (`fail(_:)`); answers are the plug-in's and its outcome type's.
public protocol TransportPooledRequest: PoolableRequest {
    associatedtype Submission: TransportSubmission
    init(request: Submission, poolRequestID: UInt64, deadline: NIODeadline)
    var request: Submission { get }
    /// Times it went back to the queue unanswered (never processed, or its fate unknown).
    var resends: Int { get set }
    /// Completes the request without an answer (cancelled, shut down, deadline, connect failure...).
    func fail(_ failure: PushTransportFailure)
}

extension TransportSubmission {
    public var isExpress: Bool { false }
}
