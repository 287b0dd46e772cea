public import NIOCore

/// The parts of HTTP/2's wire format (RFC 9113) that the APNs client speaks itself.
///
/// The client writes and parses frames directly instead of going through `NIOHTTP2Handler`: a provider
/// that fans one notification out to a million devices sends the same two frames a million times, and
/// the general-purpose handler's per-stream bookkeeping, header lists and frame values cost about half
/// of the client's CPU per notification (measured: 17 µs of 34). What it did for us is here, limited to
/// a client that only ever sends a request HEADERS + DATA pair per stream and reads small answers:
/// preface and SETTINGS exchange, PING and SETTINGS acknowledgements, flow control in both directions,
/// CONTINUATION assembly, and the frame-level checks that make a broken peer a connection error.
public enum HTTP2Wire {
    public static let clientPreface: StaticString = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    public static let frameHeaderLength = 9
    /// RFC 9113 §6.5.2: SETTINGS_MAX_FRAME_SIZE starts at, and cannot go below, 16,384.
    public static let defaultMaximumFrameSize = 16_384
    public static let defaultInitialWindowSize = 65_535
    public static let maximumWindowSize = Int(Int32.max)
    public static let defaultHeaderTableSize = 4_096

    public enum FrameType: UInt8 {
        case data = 0x0
        case headers = 0x1
        case priority = 0x2
        case rstStream = 0x3
        case settings = 0x4
        case pushPromise = 0x5
        case ping = 0x6
        case goAway = 0x7
        case windowUpdate = 0x8
        case continuation = 0x9
    }

    public enum Flag {
        public static let endStream: UInt8 = 0x1
        public static let ack: UInt8 = 0x1
        public static let endHeaders: UInt8 = 0x4
        public static let padded: UInt8 = 0x8
        public static let priority: UInt8 = 0x20
    }

    public enum Setting: UInt16 {
        case headerTableSize = 0x1
        case enablePush = 0x2
        case maxConcurrentStreams = 0x3
        case initialWindowSize = 0x4
        case maxFrameSize = 0x5
        case maxHeaderListSize = 0x6
    }

    /// RFC 9113 §7.
    public enum ErrorCode: UInt32, Sendable {
        case noError = 0x0
        case protocolError = 0x1
        case internalError = 0x2
        case flowControlError = 0x3
        case settingsTimeout = 0x4
        case streamClosed = 0x5
        case frameSizeError = 0x6
        case refusedStream = 0x7
        case cancel = 0x8
        case compressionError = 0x9
        case connectError = 0xa
        case enhanceYourCalm = 0xb
        case inadequateSecurity = 0xc
        case http11Required = 0xd

        public static func describe(_ code: UInt32) -> String {
            ErrorCode(rawValue: code).map { "\($0)" } ?? "0x\(String(code, radix: 16))"
        }
    }

    public static func writeFrameHeader(
        length: Int,
        type: FrameType,
        flags: UInt8,
        streamID: UInt32,
        into buffer: inout ByteBuffer
    ) {
        buffer.writeInteger(UInt8(truncatingIfNeeded: length >> 16))
        buffer.writeInteger(UInt16(truncatingIfNeeded: length))
        buffer.writeInteger(type.rawValue)
        buffer.writeInteger(flags)
        buffer.writeInteger(streamID & 0x7fff_ffff)
    }

    /// Writes the length into a frame header reserved earlier at `index` (the rest is already there).
    public static func setFrameLength(_ length: Int, atHeaderIndex index: Int, in buffer: inout ByteBuffer) {
        buffer.setInteger(UInt8(truncatingIfNeeded: length >> 16), at: index)
        buffer.setInteger(UInt16(truncatingIfNeeded: length), at: index + 1)
    }
}

/// A connection error the peer caused (RFC 9113 §5.4.1): we send GOAWAY with `code` and close.
public struct HTTP2ConnectionError: Error, Hashable, CustomStringConvertible {
    public var code: HTTP2Wire.ErrorCode
    public var message: String

    public init(code: HTTP2Wire.ErrorCode, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "HTTP/2 \(code): \(message)" }
}
