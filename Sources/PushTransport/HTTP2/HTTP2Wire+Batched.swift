public import NIOCore

/// Per-request frame writes in fewer, larger `ByteBuffer` calls: each call checks capacity and
/// uniqueness and, through the buffer's storage class, costs exclusivity checks, and a million
/// notifications make each of these run a million times.
extension HTTP2Wire {
    /// The same 9 bytes as ``writeFrameHeader(length:type:flags:streamID:into:)``, in two writes instead of five.
    @inline(__always)
    public static func writeFrameHeaderBatched(
        length: Int,
        type: FrameType,
        flags: UInt8,
        streamID: UInt32,
        into buffer: inout ByteBuffer
    ) {
        let streamID = streamID & 0x7fff_ffff
        let head =
            UInt64(truncatingIfNeeded: length & 0xff_ffff) << 40 | UInt64(type.rawValue) << 32 | UInt64(flags) << 24
            | UInt64(streamID >> 8)
        buffer.writeMultipleIntegers(head, UInt8(truncatingIfNeeded: streamID))
    }
}
