import NIOCore
import PushTransport
import PushgateCore

/// APNs's per-request `:path` write in fewer, larger `ByteBuffer` calls (see `HTTP2Wire.writeFrameHeaderBatched`).
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
