public import NIOCore

/// A decoder of the legacy protocol's fixed-layout messages. Shares one end-of-stream rule: decode
/// every complete message left, then a partial message at EOF is `truncated` (the peer closed mid-message).
public protocol LegacyMessageDecoder: ByteToMessageDecoder {}

extension LegacyMessageDecoder {
    public mutating func decodeLast(
        context: ChannelHandlerContext,
        buffer: inout ByteBuffer,
        seenEOF: Bool
    ) throws -> DecodingState {
        while try self.decode(context: context, buffer: &buffer) == .continue {}
        if seenEOF, buffer.readableBytes > 0 {
            throw LegacyDecodingError.truncated(remainingBytes: buffer.readableBytes)
        }
        return .needMoreData
    }
}
