import NIOCore

/// Sits between TLS and `NIOHTTP2Handler` and writes a GOAWAY frame straight to the wire.
///
/// Why not through `NIOHTTP2Handler`: once it has *sent* a GOAWAY, NIOHTTP2 1.46 ignores HEADERS
/// of streams above the last stream ID but treats their DATA frames as a connection error
/// (`NoSuchStream`, PROTOCOL_ERROR): any client that pipelined requests with bodies would see the
/// connection torn down instead of the graceful GOAWAY that APNs sends. Written here, the GOAWAY
/// reaches the client while NIOHTTP2 keeps accepting the later streams, which the connection
/// handler never answers, as a real server would.
///
/// Frame boundaries hold because `NIOHTTP2Handler` writes whole frames and the connection
/// handler flushes it before injecting.
final class RawFrameWriter: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var context: ChannelHandlerContext?

    init() {}

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// Writes and flushes GOAWAY(lastStreamID, NO_ERROR) with no debug data.
    func writeGoAway(lastStreamID: Int) {
        guard let context else { return }
        var frame = context.channel.allocator.buffer(capacity: 17)
        frame.writeInteger(UInt32(8) << 8 | 0x07)  // length 8 (24 bits), type GOAWAY
        frame.writeInteger(UInt8(0))  // flags
        frame.writeInteger(UInt32(0))  // stream 0
        frame.writeInteger(UInt32(lastStreamID) & 0x7FFF_FFFF)
        frame.writeInteger(UInt32(0))  // NO_ERROR
        context.writeAndFlush(self.wrapOutboundOut(frame), promise: nil)
    }
}
