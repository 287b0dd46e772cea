import NIOCore
import PushTransport
import PushgateCore

/// Web Push as a plug-in of the transport layer, for the pool of one origin: the connection is
/// ``WebPushConnectionHandler`` (HTTP/2 or HTTP/1.1, as ALPN decides); the pool, TLS and bootstrap are the
/// shared ones. New connections ask the client's ``WebPushConnectionBudget`` first (the cap over origins).
struct WebPushPlugin: TransportPlugin {
    typealias Request = WebPushPooledRequest

    let origin: WebPushOrigin
    /// `host[:port]` as the origin writes it (`:authority`, `Host`).
    let authority: String
    let credentials: WebPushVAPIDCredentials
    let budget: WebPushConnectionBudget
    /// Retires one idle connection of an origin's pool (``WebPushOriginPools/retireIdleConnection(of:)``).
    let releaseIdle: @Sendable (WebPushOrigin) -> Void
    /// Streams, ping and idle timeout of an HTTP/2 connection; its idle timeout serves HTTP/1.1 too.
    let http2: HTTP2ConnectionStateMachine.Configuration

    var serviceName: String { "Web Push" }

    func makeConnection(_ context: TransportConnectionContext<Self>) -> WebPushConnectionHandler {
        WebPushConnectionHandler(context, plugin: self)
    }

    func admitConnection(id: Int, open: @escaping @Sendable () -> Void) {
        budget.admit(.init(origin: origin, connection: id), open: open)
    }

    func connectionOpened() { credentials.metrics.connectionsOpened.increment() }
    func connectionFailed() { credentials.metrics.connectionFailures.increment() }

    func connectionEnded(id: Int) {
        budget.release(.init(origin: origin, connection: id))
    }

    /// At each tick of this origin's pool: the client's gauges take this origin's sample; and while another origin's connection waits for a slot of the
    /// overall cap and this pool has nothing queued, one of its idle connections closes for it.
    func sampled(queued: Int, inFlight: Int, connections: Int, activeConnections: Int) {
        credentials.metrics.sampled(
            origin: origin,
            queued: queued,
            inFlight: inFlight,
            connections: connections,
            activeConnections: activeConnections
        )
        guard queued == 0, activeConnections > 0, budget.hasWaiters else { return }
        releaseIdle(origin)
    }
}
