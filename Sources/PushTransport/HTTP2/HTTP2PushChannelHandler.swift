public import NIOCore

/// The channel handler of one service's HTTP/2 push connection: NIO's entry points into
/// ``HTTP2PushConnectionHandler`` for that service's exchange.
///
/// Each service declares a final class conforming to this in its own module. NIO calls a handler through
/// the witness table of its `ChannelInboundHandler` conformance; a conformance of the generic class
/// itself would run the handler's unspecialised code, which looks up generic metadata at run time for
/// every frame and stream. So the service's class writes out the hot entry points itself (`channelRead`,
/// `channelReadComplete`, `wake`, and `handlerAdded`, which makes the tick and wake closures), each one
/// call into the connection: those calls are compiled in the service's module, where the handler's
/// `@inlinable` code is specialised for the exchange. A protocol extension's default is not: its witness
/// calls the generic implementation. The defaults below serve the cold entry points only.
public protocol HTTP2PushChannelHandler: ChannelInboundHandler, RemovableChannelHandler, PooledConnection
where InboundIn == ByteBuffer, OutboundOut == ByteBuffer {
    associatedtype Exchange: HTTP2PushExchange
    var connection: HTTP2PushConnectionHandler<Exchange> { get }
}

extension HTTP2PushChannelHandler {
    /// Added to the connection's receive window at start (RFC 9113: it starts at 65,535).
    @inlinable
    public static var initialConnectionWindowIncrement: Int {
        HTTP2PushConnectionHandler<Exchange>.initialConnectionWindowIncrement
    }

    @inlinable
    public func handlerRemoved(context: ChannelHandlerContext) { connection.handlerRemoved(context: context) }

    @inlinable
    public func channelActive(context: ChannelHandlerContext) { connection.channelActive(context: context) }

    @inlinable
    public func channelInactive(context: ChannelHandlerContext) { connection.channelInactive(context: context) }

    @inlinable
    public func errorCaught(context: ChannelHandlerContext, error: any Error) {
        connection.errorCaught(context: context, error: error)
    }

    @inlinable
    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        connection.userInboundEventTriggered(context: context, event: event)
    }

    @inlinable
    public func closeGracefully() { connection.closeGracefully() }

    @inlinable
    public func cancel(poolRequestID: UInt64) -> Bool { connection.cancel(poolRequestID: poolRequestID) }
}
