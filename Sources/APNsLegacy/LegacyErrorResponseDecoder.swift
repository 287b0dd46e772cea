public import NIOCore

/// Reads 6-byte error responses (`|8|status|identifier|`) from the legacy gateway, in any split.
///
/// A first byte other than 8 is a `LegacyDecodingError.unexpectedCommand`; a stream that ends inside a
/// response is `.truncated`.
public struct LegacyErrorResponseDecoder: LegacyMessageDecoder {
    public typealias InboundOut = LegacyErrorResponse

    public init() {}

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let command = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) else { return .needMoreData }
        guard command == LegacyErrorResponse.command else {
            throw LegacyDecodingError.unexpectedCommand(command, expected: [LegacyErrorResponse.command])
        }
        guard buffer.readableBytes >= LegacyErrorResponse.byteCount else { return .needMoreData }
        buffer.moveReaderIndex(forwardBy: 1)
        let status = buffer.readInteger(as: UInt8.self)!
        let identifier = buffer.readInteger(as: UInt32.self)!
        context.fireChannelRead(
            Self.wrapInboundOut(LegacyErrorResponse(status: .init(rawValue: status), identifier: identifier))
        )
        return .continue
    }
}
