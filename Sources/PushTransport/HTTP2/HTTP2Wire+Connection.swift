public import NIOCore

/// The connection-level frames any HTTP/2 push client writes (RFC 9113): its preface, acknowledgements,
/// pings, window updates and GOAWAY. Stream frames (HEADERS, DATA, RST_STREAM) are the plug-in's.
extension HTTP2Wire {
    /// §3.4: the preface, our SETTINGS, and a WINDOW_UPDATE adding `connectionWindowIncrement` to the
    /// connection's receive window (it starts at 65,535).
    public static func writeClientPreface(
        settings: [(Setting, UInt32)],
        connectionWindowIncrement: Int,
        into buffer: inout ByteBuffer
    ) {
        buffer.writeStaticString(clientPreface)
        writeFrameHeader(length: 6 * settings.count, type: .settings, flags: 0, streamID: 0, into: &buffer)
        for (setting, value) in settings {
            buffer.writeInteger(setting.rawValue)
            buffer.writeInteger(value)
        }
        writeConnectionWindowUpdate(connectionWindowIncrement, into: &buffer)
    }

    public static func writeSettingsAcknowledgement(into buffer: inout ByteBuffer) {
        writeFrameHeader(length: 0, type: .settings, flags: Flag.ack, streamID: 0, into: &buffer)
    }

    public static func writePing(_ opaque: UInt64, acknowledging: Bool, into buffer: inout ByteBuffer) {
        writeFrameHeader(length: 8, type: .ping, flags: acknowledging ? Flag.ack : 0, streamID: 0, into: &buffer)
        buffer.writeInteger(opaque)
    }

    public static func writeConnectionWindowUpdate(_ increment: Int, into buffer: inout ByteBuffer) {
        writeFrameHeader(length: 4, type: .windowUpdate, flags: 0, streamID: 0, into: &buffer)
        buffer.writeInteger(UInt32(increment))
    }

    /// §5.4.1: GOAWAY for a connection error we detected (last stream id 0: we accept no server streams),
    /// with the first 256 bytes of its message as debug data.
    public static func writeGoAway(for error: HTTP2ConnectionError, into buffer: inout ByteBuffer) {
        let message = Array(error.message.utf8.prefix(256))
        writeFrameHeader(length: 8 + message.count, type: .goAway, flags: 0, streamID: 0, into: &buffer)
        buffer.writeInteger(UInt32(0))
        buffer.writeInteger(error.code.rawValue)
        buffer.writeBytes(message)
    }
}
