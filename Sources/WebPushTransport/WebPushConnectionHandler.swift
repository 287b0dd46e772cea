import Logging
import NIOCore
import NIOHTTP1
import NIOTLS
import PushTransport
import PushgateCore

/// The connection the pool of one origin opens: TLS offers `h2` and `http/1.1` by ALPN, and what the
/// server picks decides the rest. HTTP/2 runs the transport layer's HTTP/2 push engine with
/// ``WebPushHTTP2Exchange`` (every stream the server allows); HTTP/1.1 (or no ALPN answer) adds NIOHTTP1's
/// client codec and a ``WebPushHTTP1Handler`` behind this handler (one request at a time).
///
/// It stays first behind TLS either way, as the pool's handle on the connection (`wake`,
/// `closeGracefully`): for HTTP/2 it calls the engine, whose code is specialised here for the Web Push
/// exchange; for HTTP/1.1 it passes the bytes on.
final class WebPushConnectionHandler: ChannelInboundHandler, RemovableChannelHandler, PooledConnection {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum Mode {
        /// TLS handshake under way.
        case negotiating
        case http2(HTTP2PushConnectionHandler<WebPushHTTP2Exchange>)
        case http1(WebPushHTTP1Handler)
    }

    private let connection: TransportConnectionContext<WebPushPlugin>
    private let plugin: WebPushPlugin
    private var mode = Mode.negotiating
    private var closeRequested = false
    private var lastError: String?

    init(_ connection: TransportConnectionContext<WebPushPlugin>, plugin: WebPushPlugin) {
        self.connection = connection
        self.plugin = plugin
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case .negotiating = mode, case TLSUserEvent.handshakeCompleted(let negotiated) = event else {
            return context.fireUserInboundEventTriggered(event)
        }
        do {
            if negotiated == "h2" {
                let engine = makeHTTP2Engine(now: context.eventLoop.now)
                mode = .http2(engine)
                engine.handlerAdded(context: context)
            } else {
                let handler = makeHTTP1Handler(now: context.eventLoop.now)
                let sync = context.pipeline.syncOperations
                try sync.addHTTPClientHandlers(position: .last)
                try sync.addHandler(handler, position: .last)
                mode = .http1(handler)
            }
        } catch {
            lastError = "\(error)"
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
        if closeRequested { closeGracefully() }
    }

    private func makeHTTP2Engine(now: NIODeadline) -> HTTP2PushConnectionHandler<WebPushHTTP2Exchange> {
        HTTP2PushConnectionHandler(
            connectionID: connection.id,
            delegate: connection.pool,
            exchange: WebPushHTTP2Exchange(
                origin: plugin.origin,
                authority: plugin.authority,
                credentials: plugin.credentials,
                pool: connection.pool
            ),
            configuration: .init(
                connection: plugin.http2,
                tickInterval: connection.tickInterval,
                answerTimeout: connection.pool.configuration.requestTimeout,
                logger: connection.logger
            ),
            now: now
        )
    }

    private func makeHTTP1Handler(now: NIODeadline) -> WebPushHTTP1Handler {
        var logger = connection.logger
        logger[metadataKey: "webpush.connection_id"] = "\(connection.id)"
        return WebPushHTTP1Handler(
            settings: .init(
                connectionID: connection.id,
                pool: connection.pool,
                origin: plugin.origin,
                authority: plugin.authority,
                credentials: plugin.credentials,
                tickInterval: connection.tickInterval,
                answerTimeout: connection.pool.configuration.requestTimeout,
                logger: logger
            ),
            idleTimeout: plugin.http2.idleTimeout,
            now: now
        )
    }

    // MARK: Channel events

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch mode {
        case .http2(let engine): engine.channelRead(context: context, bytes: unwrapInboundIn(data))
        case .http1: context.fireChannelRead(data)
        case .negotiating: break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        switch mode {
        case .http2(let engine): engine.channelReadComplete(context: context)
        case .http1, .negotiating: context.fireChannelReadComplete()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        switch mode {
        case .http2(let engine):
            engine.channelInactive(context: context)
        case .http1:
            context.fireChannelInactive()
        case .negotiating:
            // TLS or TCP failed before a protocol was agreed: the attempt failed.
            connection.pool.connectionClosed(connection.id, everReady: false, error: lastError ?? "connection closed")
            context.fireChannelInactive()
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch mode {
        case .http2(let engine):
            engine.errorCaught(context: context, error: error)
        case .http1:
            context.fireErrorCaught(error)
        case .negotiating:
            lastError = TransportTLS.describe(error)
            context.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        if case .http2(let engine) = mode { engine.handlerRemoved(context: context) }
    }

    // MARK: The pool's calls

    func wake() {
        switch mode {
        case .http2(let engine): engine.wake()
        case .http1(let handler): handler.wake()
        case .negotiating: break
        }
    }

    func closeGracefully() {
        switch mode {
        case .http2(let engine): engine.closeGracefully()
        case .http1(let handler): handler.closeGracefully()
        case .negotiating: closeRequested = true
        }
    }

    func cancel(poolRequestID: UInt64) -> Bool {
        if case .http2(let engine) = mode { return engine.cancel(poolRequestID: poolRequestID) }
        return false
    }
}
