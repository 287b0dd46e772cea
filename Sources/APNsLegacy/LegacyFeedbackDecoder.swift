public import NIOCore
import PushgateCore

/// Reads feedback tuples (`|timestamp (4)|token length (2)|token|`) in any split.
///
/// A token length outside 8…100 bytes (what `DeviceToken` accepts) is a `LegacyDecodingError`, raised as
/// soon as the length is read, so a corrupt stream is never buffered for its declared size. A stream that
/// ends inside a tuple is `.truncated`.
public struct LegacyFeedbackDecoder: LegacyMessageDecoder {
    public typealias InboundOut = LegacyFeedbackTuple

    private static let headerByteCount = 6

    public init() {}

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        let start = buffer.readerIndex
        guard let length = buffer.getInteger(at: start + 4, as: UInt16.self).map(Int.init) else {
            return .needMoreData
        }
        guard length >= DeviceToken.minimumByteCount, length <= DeviceToken.maximumByteCount else {
            throw LegacyDecodingError.invalidFeedbackTokenLength(length)
        }
        guard buffer.readableBytes >= Self.headerByteCount + length else { return .needMoreData }
        let timestamp = buffer.readInteger(as: UInt32.self)!
        buffer.moveReaderIndex(forwardBy: 2)
        let token: DeviceToken
        do {
            token = try DeviceToken(bytes: buffer.readBytes(length: length)!)
        } catch {
            // Unreachable: any 8 to 100 bytes form a valid token. Kept as a decoding error, not a trap.
            throw LegacyDecodingError.invalidFeedbackTokenLength(length)
        }
        context.fireChannelRead(Self.wrapInboundOut(LegacyFeedbackTuple(timestampSeconds: timestamp, token: token)))
        return .continue
    }
}
