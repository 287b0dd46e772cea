import NIOCore
import PushTransport
import PushgateCore

/// The per-request writes of ``HTTP2Wire`` and ``HPACKRequestEncoder`` in fewer, larger `ByteBuffer`
/// calls: each call checks capacity and uniqueness and, through the buffer's storage class, costs
/// exclusivity checks, and a million notifications make each of these run a million times.
extension HTTP2Wire {
    /// The same 9 bytes as ``writeFrameHeader(length:type:flags:streamID:into:)``, in two writes instead of five.
    @inline(__always)
    static func writeFrameHeaderBatched(
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

extension HPACKRequestEncoder {
    /// `:method POST`, `:scheme https` (static 3 and 7) and `:path` `/3/device/<hex>` as a literal
    /// without indexing (static name 4), the hex copied from the token's stored String.
    static func writeMethodSchemeAndPath(device token: DeviceToken, into buffer: inout ByteBuffer) {
        let hex = token.hex.utf8
        let length = devicePathPrefix.utf8CodeUnitCount + hex.count
        if length < 127 {
            buffer.writeMultipleIntegers(0x83 as UInt8, 0x87 as UInt8, UInt8(StaticName.path), UInt8(length))
            buffer.writeStaticString(devicePathPrefix)
            buffer.writeString(token.hex)
        } else {
            buffer.writeMultipleIntegers(0x83 as UInt8, 0x87 as UInt8)
            writePath(deviceHex: token.hex, into: &buffer)
        }
    }

    static let devicePathPrefix: StaticString = "/3/device/"
}
