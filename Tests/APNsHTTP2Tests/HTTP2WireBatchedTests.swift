import NIOCore
import PushgateCore
import Testing

@testable import APNsHTTP2
@testable import PushTransport

/// The batched writes must produce exactly the bytes of the plain ones they replace.
@Suite("Batched HTTP/2 and HPACK writes")
struct HTTP2WireBatchedTests {
    @Test(
        "frame headers: the same 9 bytes as writeFrameHeader",
        arguments: [
            (0, UInt32(1)), (1, 3), (255, 0x7fff_ffff), (16_384, 0x8000_0001), (0xff_ffff, 0x0102_0304),
            (70_000, 0xffff_ffff),
        ]
    )
    func frameHeader(length: Int, streamID: UInt32) {
        for type in [HTTP2Wire.FrameType.headers, .data, .continuation] {
            for flags: UInt8 in [0, 0x1, 0x4, 0x25] {
                var plain = ByteBuffer()
                var batched = ByteBuffer()
                HTTP2Wire.writeFrameHeader(length: length, type: type, flags: flags, streamID: streamID, into: &plain)
                HTTP2Wire.writeFrameHeaderBatched(
                    length: length,
                    type: type,
                    flags: flags,
                    streamID: streamID,
                    into: &batched
                )
                #expect(plain == batched, "length \(length), type \(type), flags \(flags), stream \(streamID)")
            }
        }
    }

    @Test(
        "method, scheme and path: the same bytes as the static indices and writePath, for short and long tokens",
        arguments: [8, 32, 58, 59, 100]
    )
    func methodSchemeAndPath(tokenBytes: Int) throws {
        let token = try DeviceToken(hex: String(repeating: "a1", count: tokenBytes))
        var plain = ByteBuffer()
        plain.writeInteger(0x83 as UInt8)
        plain.writeInteger(0x87 as UInt8)
        HPACKRequestEncoder.writePath(deviceHex: token.hex, into: &plain)
        var batched = ByteBuffer()
        HPACKRequestEncoder.writeMethodSchemeAndPath(device: token, into: &batched)
        #expect(plain == batched)
    }
}
