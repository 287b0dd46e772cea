import NIOCore

/// A notification as the simulated legacy gateway read it (any of the three formats), before its
/// content is judged.
struct LegacyGatewayNotification: Sendable, Hashable {
    /// 0 simple, 1 enhanced, 2 frame.
    var command: UInt8
    /// Nil for the simple format and for a frame without item 3: an error about it names identifier 0.
    var identifier: UInt32?
    var expiry: UInt32?
    var priority: UInt8?
    var token: [UInt8]
    var payload: [UInt8]
}

/// What the gateway reads off the wire: a notification, or bytes it cannot frame at all (after which
/// it answers and closes, since it cannot find the next message).
enum LegacyGatewayInput: Sendable, Hashable {
    case notification(LegacyGatewayNotification)
    /// `identifier` when it was read before the problem.
    case unreadable(identifier: UInt32?, problem: String)
}

/// Frames the legacy provider interface's three notification formats, written from Apple's archived
/// documentation of the binary interface (independently of the gateway's own codec, so the two cannot
/// share a bug). Big-endian throughout:
///
/// - command 0: `|0|token length (2)|token|payload length (2)|payload|`
/// - command 1: `|1|identifier (4)|expiry (4)|token length (2)|token|payload length (2)|payload|`
/// - command 2: `|2|frame length (4)|items|`, each item `|item id (1)|item length (2)|data|`; items
///   1 token, 2 payload, 3 identifier (4 bytes), 4 expiration (4 bytes), 5 priority (1 byte).
///
/// Any split of the input works. After an unreadable message it reads nothing more.
struct LegacyGatewayParser: ByteToMessageDecoder {
    typealias InboundOut = LegacyGatewayInput

    /// Larger frames are refused rather than buffered: no valid frame (32-byte token, 2 KB payload)
    /// comes near it.
    static let maximumFrameLength = 65_536

    private var failed = false

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard !failed else {
            buffer.moveReaderIndex(to: buffer.writerIndex)
            return .needMoreData
        }
        guard let command = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) else { return .needMoreData }
        let result: LegacyGatewayInput?
        switch command {
        case 0: result = Self.readSimple(&buffer)
        case 1: result = Self.readEnhanced(&buffer)
        case 2: result = Self.readFrame(&buffer)
        default: result = .unreadable(identifier: nil, problem: "unknown command \(command)")
        }
        guard let result else { return .needMoreData }
        if case .unreadable = result {
            failed = true
            buffer.moveReaderIndex(to: buffer.writerIndex)
        }
        context.fireChannelRead(Self.wrapInboundOut(result))
        return failed ? .needMoreData : .continue
    }

    mutating func decodeLast(
        context: ChannelHandlerContext,
        buffer: inout ByteBuffer,
        seenEOF: Bool
    ) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        // A partial message at the end is dropped: the provider closed mid-message.
        buffer.moveReaderIndex(to: buffer.writerIndex)
        return .needMoreData
    }

    /// Reads `|length (2)|bytes|` at `offset`; nil when not all there yet.
    private static func lengthPrefixed(_ buffer: ByteBuffer, at offset: Int) -> (bytes: [UInt8], end: Int)? {
        guard let length = buffer.getInteger(at: offset, as: UInt16.self),
            let bytes = buffer.getBytes(at: offset + 2, length: Int(length))
        else { return nil }
        return (bytes, offset + 2 + Int(length))
    }

    private static func readSimple(_ buffer: inout ByteBuffer) -> LegacyGatewayInput? {
        let start = buffer.readerIndex
        guard let token = lengthPrefixed(buffer, at: start + 1), let payload = lengthPrefixed(buffer, at: token.end)
        else {
            return nil
        }
        buffer.moveReaderIndex(to: payload.end)
        return .notification(.init(command: 0, token: token.bytes, payload: payload.bytes))
    }

    private static func readEnhanced(_ buffer: inout ByteBuffer) -> LegacyGatewayInput? {
        let start = buffer.readerIndex
        guard let identifier = buffer.getInteger(at: start + 1, as: UInt32.self),
            let expiry = buffer.getInteger(at: start + 5, as: UInt32.self),
            let token = lengthPrefixed(buffer, at: start + 9), let payload = lengthPrefixed(buffer, at: token.end)
        else { return nil }
        buffer.moveReaderIndex(to: payload.end)
        return .notification(
            .init(command: 1, identifier: identifier, expiry: expiry, token: token.bytes, payload: payload.bytes)
        )
    }

    private static func readFrame(_ buffer: inout ByteBuffer) -> LegacyGatewayInput? {
        let start = buffer.readerIndex
        guard let length = buffer.getInteger(at: start + 1, as: UInt32.self) else { return nil }
        guard length <= maximumFrameLength else {
            return .unreadable(identifier: nil, problem: "frame length \(length) over \(maximumFrameLength)")
        }
        guard var frame = buffer.getSlice(at: start + 5, length: Int(length)) else { return nil }
        buffer.moveReaderIndex(to: start + 5 + Int(length))

        var notification = LegacyGatewayNotification(command: 2, token: [], payload: [])
        var seen = Set<UInt8>()
        var hasToken = false
        var hasPayload = false
        while frame.readableBytes > 0 {
            guard let item = frame.readInteger(as: UInt8.self), let itemLength = frame.readInteger(as: UInt16.self),
                let data = frame.readBytes(length: Int(itemLength))
            else {
                return .unreadable(
                    identifier: notification.identifier,
                    problem: "an item runs past the end of its frame"
                )
            }
            guard seen.insert(item).inserted else {
                return .unreadable(identifier: notification.identifier, problem: "item \(item) appears twice")
            }
            func integer(_ size: Int) -> UInt32? {
                guard data.count == size else { return nil }
                return data.reduce(0) { $0 << 8 | UInt32($1) }
            }
            switch item {
            case 1:
                notification.token = data
                hasToken = true
            case 2:
                notification.payload = data
                hasPayload = true
            case 3:
                guard let value = integer(4) else {
                    return .unreadable(identifier: nil, problem: "identifier item is not 4 bytes")
                }
                notification.identifier = value
            case 4:
                guard let value = integer(4) else {
                    return .unreadable(identifier: notification.identifier, problem: "expiration item is not 4 bytes")
                }
                notification.expiry = value
            case 5:
                guard let value = integer(1) else {
                    return .unreadable(identifier: notification.identifier, problem: "priority item is not 1 byte")
                }
                notification.priority = UInt8(value)
            default:
                return .unreadable(identifier: notification.identifier, problem: "unknown item \(item)")
            }
        }
        // A frame without token or payload item is well framed: the gateway answers 2 or 4 for it.
        if !hasToken { notification.token = [] }
        if !hasPayload { notification.payload = [] }
        return .notification(notification)
    }
}

/// The gateway's judgement of a well-framed notification, from Apple's table of error-response statuses.
enum LegacyGatewayStatus: UInt8, Sendable {
    case processingError = 1
    case missingDeviceToken = 2
    case missingPayload = 4
    case invalidTokenSize = 5
    case invalidPayloadSize = 7
    case invalidToken = 8
    case shutdown = 10
    case protocolError = 128

    /// Apple's limits: 32-byte tokens; payloads of 256 bytes in commands 0 and 1, 2 KB in command 2.
    static func check(_ notification: LegacyGatewayNotification) -> LegacyGatewayStatus? {
        if notification.token.isEmpty { return .missingDeviceToken }
        if notification.payload.isEmpty { return .missingPayload }
        if notification.token.count != 32 { return .invalidTokenSize }
        let limit = notification.command == 2 ? 2048 : 256
        if notification.payload.count > limit { return .invalidPayloadSize }
        return nil
    }
}
