public import NIOCore

/// Reads notifications in all three legacy formats (commands 0, 1 and 2, mixed freely), in any split:
/// what a legacy gateway, such as the simulator, parses from its clients.
///
/// It checks structure only: an unknown command, an unknown frame item, an item that runs past its frame,
/// a fixed-size item of the wrong size, a repeated item, or a frame without its token or payload is a
/// `LegacyDecodingError`. Limits on content (token size, payload size, priority) are the gateway's to
/// answer with an error response.
public struct LegacyNotificationDecoder: LegacyMessageDecoder {
    public typealias InboundOut = LegacyNotification

    /// The default frame length limit: what a frame with a 100-byte token, a payload at the 2-byte length
    /// maximum and every fixed item needs, so no frame the other formats could express is refused.
    public static let defaultMaximumFrameLength = 3 + 100 + 3 + Int(UInt16.max) + 7 + 7 + 4

    /// Frames declaring more than this are refused before they are buffered.
    public let maximumFrameLength: Int

    public init(maximumFrameLength: Int = Self.defaultMaximumFrameLength) {
        self.maximumFrameLength = maximumFrameLength
    }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let command = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) else { return .needMoreData }
        let decoded: LegacyNotification?
        switch LegacyFormat(rawValue: command) {
        case .simple: decoded = Self.readSimple(from: &buffer)
        case .enhanced: decoded = Self.readEnhanced(from: &buffer)
        case .frame: decoded = try self.readFrame(from: &buffer)
        case nil: throw LegacyDecodingError.unexpectedCommand(command, expected: LegacyFormat.allCases.map(\.rawValue))
        }
        guard let decoded else { return .needMoreData }
        context.fireChannelRead(Self.wrapInboundOut(decoded))
        return .continue
    }

    // MARK: Commands 0 and 1

    /// `|0|token length|token|payload length|payload|`, or nil until all of it has arrived.
    private static func readSimple(from buffer: inout ByteBuffer) -> LegacyNotification? {
        let start = buffer.readerIndex
        guard let (token, payload, end) = Self.tokenAndPayload(in: buffer, at: start + 1) else { return nil }
        buffer.moveReaderIndex(to: end)
        return LegacyNotification(format: .simple, token: token, payload: payload)
    }

    /// `|1|identifier|expiry|token length|token|payload length|payload|`, or nil until all of it has arrived.
    private static func readEnhanced(from buffer: inout ByteBuffer) -> LegacyNotification? {
        let start = buffer.readerIndex
        guard let identifier = buffer.getInteger(at: start + 1, as: UInt32.self),
            let expiry = buffer.getInteger(at: start + 5, as: UInt32.self),
            let (token, payload, end) = Self.tokenAndPayload(in: buffer, at: start + 9)
        else { return nil }
        buffer.moveReaderIndex(to: end)
        return LegacyNotification(
            format: .enhanced,
            identifier: identifier,
            expiry: expiry,
            token: token,
            payload: payload
        )
    }

    /// Two length-prefixed fields from `index`, and the index just past them; nil if they have not all arrived.
    private static func tokenAndPayload(
        in buffer: ByteBuffer,
        at index: Int
    ) -> (token: [UInt8], payload: [UInt8], end: Int)? {
        guard let token = Self.lengthPrefixed(in: buffer, at: index),
            let payload = Self.lengthPrefixed(in: buffer, at: index + 2 + token.count)
        else { return nil }
        return (token, payload, index + 4 + token.count + payload.count)
    }

    private static func lengthPrefixed(in buffer: ByteBuffer, at index: Int) -> [UInt8]? {
        guard let length = buffer.getInteger(at: index, as: UInt16.self) else { return nil }
        return buffer.getBytes(at: index + 2, length: Int(length))
    }

    // MARK: Command 2

    /// `|2|frame length|items…|`, or nil until the whole frame has arrived.
    package func readFrame(from buffer: inout ByteBuffer) throws(LegacyDecodingError) -> LegacyNotification? {
        let start = buffer.readerIndex
        guard let declared = buffer.getInteger(at: start + 1, as: UInt32.self) else { return nil }
        let length = Int(declared)
        guard length <= self.maximumFrameLength else {
            throw .frameTooLong(length: length, limit: self.maximumFrameLength)
        }
        guard buffer.readableBytes >= 5 + length else { return nil }
        let notification = try Self.parseItems(in: buffer, from: start + 5, to: start + 5 + length)
        buffer.moveReaderIndex(forwardBy: 5 + length)
        return notification
    }

    private static func parseItems(
        in buffer: ByteBuffer,
        from itemsStart: Int,
        to end: Int
    ) throws(LegacyDecodingError) -> LegacyNotification {
        var token: [UInt8]?
        var payload: [UInt8]?
        var identifier: UInt32?
        var expiry: UInt32?
        var priority: UInt8?

        var cursor = itemsStart
        while cursor < end {
            let remaining = end - cursor
            let id = buffer.getInteger(at: cursor, as: UInt8.self)!
            guard let item = LegacyFrameItem(rawValue: id) else {
                throw .unknownItem(id: id, identifier: identifier)
            }
            guard remaining >= 3 else {
                throw .itemOverrunsFrame(id: id, length: 3, remaining: remaining, identifier: identifier)
            }
            let length = Int(buffer.getInteger(at: cursor + 1, as: UInt16.self)!)
            guard 3 + length <= remaining else {
                throw .itemOverrunsFrame(id: id, length: 3 + length, remaining: remaining, identifier: identifier)
            }
            if let fixed = item.fixedLength, fixed != length {
                throw .invalidItemLength(item, length: length, identifier: identifier)
            }
            let data = cursor + 3
            switch item {
            case .deviceToken:
                guard token == nil else { throw .duplicateItem(item, identifier: identifier) }
                token = buffer.getBytes(at: data, length: length)!
            case .payload:
                guard payload == nil else { throw .duplicateItem(item, identifier: identifier) }
                payload = buffer.getBytes(at: data, length: length)!
            case .notificationIdentifier:
                guard identifier == nil else { throw .duplicateItem(item, identifier: identifier) }
                identifier = buffer.getInteger(at: data, as: UInt32.self)!
            case .expirationDate:
                guard expiry == nil else { throw .duplicateItem(item, identifier: identifier) }
                expiry = buffer.getInteger(at: data, as: UInt32.self)!
            case .priority:
                guard priority == nil else { throw .duplicateItem(item, identifier: identifier) }
                priority = buffer.getInteger(at: data, as: UInt8.self)!
            }
            cursor = data + length
        }

        guard let token else { throw .missingItem(.deviceToken, identifier: identifier) }
        guard let payload else { throw .missingItem(.payload, identifier: identifier) }
        return LegacyNotification(
            format: .frame,
            identifier: identifier,
            expiry: expiry,
            token: token,
            payload: payload,
            priority: priority
        )
    }
}
