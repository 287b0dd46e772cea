import Logging
import NIOCore
import PushTransport
import PushgateCore
import Synchronization

/// FCM over HTTP/2 as a plug-in of the transport layer: the connection handler is the shared HTTP/2
/// push connection with the FCM exchange; the pool, TLS and bootstrap are shared too.
struct FCMHTTP2Plugin: TransportPlugin {
    typealias Request = FCMPooledRequest

    var connection: HTTP2ConnectionStateMachine.Configuration
    var headers: FCMRequestHeaders
    /// The access tokens of connections made from now on; a reload replaces them
    /// (``FCMClient/renew(_:)``), connections already made keep theirs.
    let bearers: FCMBearerSlot
    var clock: any WallClock

    var serviceName: String { "FCM" }

    func makeConnection(_ context: TransportConnectionContext<Self>) -> FCMConnectionHandler {
        FCMConnectionHandler(
            HTTP2PushConnectionHandler(
                connectionID: context.id,
                delegate: context.pool,
                exchange: FCMExchange(headers: headers, bearer: bearers.current, clock: clock),
                configuration: .init(
                    connection: connection,
                    tickInterval: context.tickInterval,
                    answerTimeout: context.pool.configuration.requestTimeout,
                    logger: context.logger
                ),
                now: context.now
            )
        )
    }
}

/// The access-token cache new FCM connections write with, and every one made so far (each is shut down
/// with the client: a replaced one may still have a fetch under way).
final class FCMBearerSlot: Sendable {
    private struct State {
        var current: FCMBearerCache
        var all: [FCMBearerCache]
    }
    private let state: Mutex<State>

    init(_ bearer: FCMBearerCache) {
        state = Mutex(State(current: bearer, all: [bearer]))
    }

    var current: FCMBearerCache { state.withLock { $0.current } }

    var all: [FCMBearerCache] { state.withLock { $0.all } }

    func replace(with bearer: FCMBearerCache) {
        state.withLock { state in
            state.current = bearer
            state.all.append(bearer)
        }
    }
}

/// The FCM connection's channel handler: the transport layer's HTTP/2 push connection with the FCM
/// exchange, declared here so that NIO's calls run code specialised for FCM (``HTTP2PushChannelHandler``).
final class FCMConnectionHandler: HTTP2PushChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let connection: HTTP2PushConnectionHandler<FCMExchange>

    init(_ connection: HTTP2PushConnectionHandler<FCMExchange>) {
        self.connection = connection
    }

    // The hot entry points, specialised here (see ``HTTP2PushChannelHandler``).

    func handlerAdded(context: ChannelHandlerContext) { connection.handlerAdded(context: context) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        connection.channelRead(context: context, bytes: unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) { connection.channelReadComplete(context: context) }

    func wake() { connection.wake() }
}
