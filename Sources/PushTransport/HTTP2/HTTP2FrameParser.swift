public import NIOCore

/// A frame the client acts on, with padding, priority fields and CONTINUATION already dealt with.
public enum HTTP2InboundFrame: Equatable {
    /// A complete header block (HEADERS plus any CONTINUATION), still HPACK-encoded.
    case headers(streamID: UInt32, block: ByteBuffer, endStream: Bool)
    /// `flowControlledLength` counts padding too: it is what the connection window was charged.
    case data(streamID: UInt32, data: ByteBuffer, endStream: Bool, flowControlledLength: Int)
    case rstStream(streamID: UInt32, errorCode: UInt32)
    case settings([(parameter: UInt16, value: UInt32)])
    case settingsAcknowledged
    case ping(UInt64, ack: Bool)
    case goAway(lastStreamID: UInt32, errorCode: UInt32, debugData: ByteBuffer)
    case windowUpdate(streamID: UInt32, increment: UInt32)
    /// PRIORITY, unknown extension frames: read and dropped, as RFC 9113 §4.1 and §5.5 ask.
    case ignored

    public static func == (lhs: Self, rhs: Self) -> Bool {
        switch (lhs, rhs) {
        case let (.headers(a, b, c), .headers(d, e, f)): return a == d && b == e && c == f
        case let (.data(a, b, c, d), .data(e, f, g, h)): return a == e && b == f && c == g && d == h
        case let (.rstStream(a, b), .rstStream(c, d)): return a == c && b == d
        case let (.settings(a), .settings(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.parameter == $1.parameter && $0.value == $1.value }
        case (.settingsAcknowledged, .settingsAcknowledged), (.ignored, .ignored): return true
        case let (.ping(a, b), .ping(c, d)): return a == c && b == d
        case let (.goAway(a, b, c), .goAway(d, e, f)): return a == d && b == e && c == f
        case let (.windowUpdate(a, b), .windowUpdate(c, d)): return a == c && b == d
        default: return false
        }
    }
}

/// Cuts a byte stream from a server into frames (RFC 9113 §4 and §6), whatever way it was split.
///
/// A pure value: bytes in, frames out, and a ``HTTP2ConnectionError`` for anything that RFC 9113 makes
/// a connection error (a frame larger than we allow, a SETTINGS frame on a stream, a CONTINUATION
/// out of place, a PUSH_PROMISE when we disabled push, and so on). After an error it stays failed.
public struct HTTP2FrameParser {
    /// SETTINGS_MAX_FRAME_SIZE as we announce it (we keep the default).
    public var maximumFrameSize = HTTP2Wire.defaultMaximumFrameSize
    private var buffer: ByteBuffer
    /// A HEADERS frame without END_HEADERS: its block so far, until the last CONTINUATION.
    private var pendingHeaders: (streamID: UInt32, block: ByteBuffer, endStream: Bool)?
    private var failed: HTTP2ConnectionError?
    /// The header blocks we accept, assembled: far above any APNs answer, far below a memory problem.
    public static let maximumHeaderBlockSize = 64 * 1024

    public init(allocator: ByteBufferAllocator = ByteBufferAllocator()) {
        buffer = allocator.buffer(capacity: 0)
    }

    public mutating func append(_ bytes: inout ByteBuffer) {
        if buffer.readableBytes == 0 {
            // The common case: everything earlier was consumed. Take the buffer as it is (no copy).
            buffer = bytes
        } else {
            buffer.writeBuffer(&bytes)
        }
        bytes.moveReaderIndex(to: bytes.writerIndex)
    }

    /// The next complete frame, or nil when more bytes are needed.
    public mutating func nextFrame() throws(HTTP2ConnectionError) -> HTTP2InboundFrame? {
        if let failed { throw failed }
        do {
            while true {
                guard let parsed = try parseOne() else {
                    if buffer.readableBytes == 0 { buffer.clear() } else { buffer.discardReadBytes() }
                    return nil
                }
                if let frame = parsed { return frame }
            }
        } catch {
            failed = error
            throw error
        }
    }

    /// One frame: nil when incomplete; `.some(nil)` when it was a CONTINUATION that did not end the block.
    private mutating func parseOne() throws(HTTP2ConnectionError) -> HTTP2InboundFrame?? {
        guard buffer.readableBytes >= HTTP2Wire.frameHeaderLength else { return nil }
        let start = buffer.readerIndex
        let length =
            Int(buffer.getInteger(at: start, as: UInt8.self)!) << 16
            | Int(buffer.getInteger(at: start + 1, as: UInt16.self)!)
        guard length <= maximumFrameSize else {
            throw HTTP2ConnectionError(
                code: .frameSizeError,
                message: "frame of \(length) bytes exceeds SETTINGS_MAX_FRAME_SIZE \(maximumFrameSize)"
            )
        }
        guard buffer.readableBytes >= HTTP2Wire.frameHeaderLength + length else { return nil }
        let rawType = buffer.getInteger(at: start + 3, as: UInt8.self)!
        let flags = buffer.getInteger(at: start + 4, as: UInt8.self)!
        let streamID = buffer.getInteger(at: start + 5, as: UInt32.self)! & 0x7fff_ffff
        buffer.moveReaderIndex(forwardBy: HTTP2Wire.frameHeaderLength)
        var payload = buffer.readSlice(length: length)!

        if let pending = pendingHeaders {
            // RFC 9113 §6.10: nothing but CONTINUATION of the same stream until END_HEADERS.
            guard rawType == HTTP2Wire.FrameType.continuation.rawValue, streamID == pending.streamID else {
                throw HTTP2ConnectionError(
                    code: .protocolError,
                    message: "expected CONTINUATION of stream \(pending.streamID)"
                )
            }
            var block = pending.block
            guard block.readableBytes + payload.readableBytes <= Self.maximumHeaderBlockSize else {
                throw HTTP2ConnectionError(
                    code: .protocolError,
                    message: "header block larger than \(Self.maximumHeaderBlockSize) bytes"
                )
            }
            block.writeBuffer(&payload)
            if flags & HTTP2Wire.Flag.endHeaders != 0 {
                pendingHeaders = nil
                return .some(.headers(streamID: pending.streamID, block: block, endStream: pending.endStream))
            }
            pendingHeaders = (pending.streamID, block, pending.endStream)
            return .some(nil)
        }

        guard let type = HTTP2Wire.FrameType(rawValue: rawType) else { return .some(.ignored) }
        switch type {
        case .data:
            guard streamID != 0 else { throw HTTP2ConnectionError(code: .protocolError, message: "DATA on stream 0") }
            let data = try Self.removePadding(from: payload, flags: flags, type: "DATA")
            return .some(
                .data(
                    streamID: streamID,
                    data: data,
                    endStream: flags & HTTP2Wire.Flag.endStream != 0,
                    flowControlledLength: length
                )
            )
        case .headers:
            guard streamID != 0 else {
                throw HTTP2ConnectionError(code: .protocolError, message: "HEADERS on stream 0")
            }
            var block = try Self.removePadding(from: payload, flags: flags, type: "HEADERS")
            if flags & HTTP2Wire.Flag.priority != 0 {
                guard block.readableBytes >= 5 else {
                    throw HTTP2ConnectionError(
                        code: .frameSizeError,
                        message: "HEADERS too short for its priority fields"
                    )
                }
                block.moveReaderIndex(forwardBy: 5)
            }
            let endStream = flags & HTTP2Wire.Flag.endStream != 0
            if flags & HTTP2Wire.Flag.endHeaders != 0 {
                return .some(.headers(streamID: streamID, block: block, endStream: endStream))
            }
            // Own the bytes: the slice's storage is the read buffer, which is compacted later.
            var owned = ByteBuffer()
            owned.writeBuffer(&block)
            pendingHeaders = (streamID, owned, endStream)
            return .some(nil)
        case .priority:
            guard streamID != 0 else {
                throw HTTP2ConnectionError(code: .protocolError, message: "PRIORITY on stream 0")
            }
            guard length == 5 else {
                throw HTTP2ConnectionError(code: .frameSizeError, message: "PRIORITY of \(length) bytes")
            }
            return .some(.ignored)
        case .rstStream:
            guard streamID != 0 else {
                throw HTTP2ConnectionError(code: .protocolError, message: "RST_STREAM on stream 0")
            }
            guard length == 4 else {
                throw HTTP2ConnectionError(code: .frameSizeError, message: "RST_STREAM of \(length) bytes")
            }
            return .some(.rstStream(streamID: streamID, errorCode: payload.readInteger()!))
        case .settings:
            guard streamID == 0 else {
                throw HTTP2ConnectionError(code: .protocolError, message: "SETTINGS on stream \(streamID)")
            }
            if flags & HTTP2Wire.Flag.ack != 0 {
                guard length == 0 else {
                    throw HTTP2ConnectionError(
                        code: .frameSizeError,
                        message: "SETTINGS acknowledgement with a payload"
                    )
                }
                return .some(.settingsAcknowledged)
            }
            guard length % 6 == 0 else {
                throw HTTP2ConnectionError(code: .frameSizeError, message: "SETTINGS of \(length) bytes")
            }
            var settings: [(parameter: UInt16, value: UInt32)] = []
            settings.reserveCapacity(length / 6)
            while let parameter = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self)
            {
                try Self.validate(setting: parameter, value: value)
                settings.append((parameter, value))
            }
            return .some(.settings(settings))
        case .pushPromise:
            throw HTTP2ConnectionError(code: .protocolError, message: "PUSH_PROMISE although push is disabled")
        case .ping:
            guard streamID == 0 else {
                throw HTTP2ConnectionError(code: .protocolError, message: "PING on stream \(streamID)")
            }
            guard length == 8 else {
                throw HTTP2ConnectionError(code: .frameSizeError, message: "PING of \(length) bytes")
            }
            return .some(.ping(payload.readInteger()!, ack: flags & HTTP2Wire.Flag.ack != 0))
        case .goAway:
            guard streamID == 0 else {
                throw HTTP2ConnectionError(code: .protocolError, message: "GOAWAY on stream \(streamID)")
            }
            guard length >= 8 else {
                throw HTTP2ConnectionError(code: .frameSizeError, message: "GOAWAY of \(length) bytes")
            }
            let lastStreamID = payload.readInteger(as: UInt32.self)! & 0x7fff_ffff
            let code = payload.readInteger(as: UInt32.self)!
            var debugData = ByteBuffer()
            debugData.writeBuffer(&payload)
            return .some(.goAway(lastStreamID: lastStreamID, errorCode: code, debugData: debugData))
        case .windowUpdate:
            guard length == 4 else {
                throw HTTP2ConnectionError(code: .frameSizeError, message: "WINDOW_UPDATE of \(length) bytes")
            }
            let increment = payload.readInteger(as: UInt32.self)! & 0x7fff_ffff
            guard increment > 0 else {
                // RFC 9113 §6.9: a stream error on a stream, a connection error on the connection; both
                // mean a broken peer, and an APNs client has no use for a half-broken connection.
                throw HTTP2ConnectionError(
                    code: .protocolError,
                    message: "WINDOW_UPDATE with increment 0 on stream \(streamID)"
                )
            }
            return .some(.windowUpdate(streamID: streamID, increment: increment))
        case .continuation:
            throw HTTP2ConnectionError(code: .protocolError, message: "CONTINUATION without a HEADERS frame")
        }
    }

    private static func removePadding(
        from payload: ByteBuffer,
        flags: UInt8,
        type: String
    ) throws(HTTP2ConnectionError) -> ByteBuffer {
        guard flags & HTTP2Wire.Flag.padded != 0 else { return payload }
        var payload = payload
        guard let padLength = payload.readInteger(as: UInt8.self), Int(padLength) <= payload.readableBytes else {
            throw HTTP2ConnectionError(code: .protocolError, message: "\(type) padding longer than the frame")
        }
        return payload.readSlice(length: payload.readableBytes - Int(padLength))!
    }

    /// RFC 9113 §6.5.2: the values a peer may not send.
    private static func validate(setting parameter: UInt16, value: UInt32) throws(HTTP2ConnectionError) {
        switch HTTP2Wire.Setting(rawValue: parameter) {
        case .enablePush?:
            guard value <= 1 else {
                throw HTTP2ConnectionError(code: .protocolError, message: "SETTINGS_ENABLE_PUSH \(value)")
            }
        case .initialWindowSize?:
            guard value <= UInt32(HTTP2Wire.maximumWindowSize) else {
                throw HTTP2ConnectionError(code: .flowControlError, message: "SETTINGS_INITIAL_WINDOW_SIZE \(value)")
            }
        case .maxFrameSize?:
            guard value >= 16_384, value <= 16_777_215 else {
                throw HTTP2ConnectionError(code: .protocolError, message: "SETTINGS_MAX_FRAME_SIZE \(value)")
            }
        default:
            break
        }
    }
}
