import NIOCore
import Testing

@testable import PushTransport

@Suite("HTTP/2 connection-level frames any push client writes")
struct HTTP2WireConnectionTests {
    @Test("preface, SETTINGS, WINDOW_UPDATE, PING, SETTINGS ack and GOAWAY read back as the frames written")
    func connectionFramesReadBack() throws {
        var buffer = ByteBuffer()
        HTTP2Wire.writeClientPreface(
            settings: [(.enablePush, 0), (.maxConcurrentStreams, 100)],
            connectionWindowIncrement: 1000,
            into: &buffer
        )
        let preface = buffer.readString(length: HTTP2Wire.clientPreface.utf8CodeUnitCount)
        #expect(preface == "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        HTTP2Wire.writeSettingsAcknowledgement(into: &buffer)
        HTTP2Wire.writePing(42, acknowledging: false, into: &buffer)
        HTTP2Wire.writePing(43, acknowledging: true, into: &buffer)
        HTTP2Wire.writeGoAway(for: HTTP2ConnectionError(code: .protocolError, message: "bad"), into: &buffer)

        var parser = HTTP2FrameParser()
        parser.append(&buffer)
        var frames: [HTTP2InboundFrame] = []
        while let frame = try parser.nextFrame() { frames.append(frame) }
        #expect(
            frames == [
                .settings([(parameter: 2, value: 0), (parameter: 3, value: 100)]),
                .windowUpdate(streamID: 0, increment: 1000),
                .settingsAcknowledged,
                .ping(42, ack: false),
                .ping(43, ack: true),
                .goAway(
                    lastStreamID: 0,
                    errorCode: HTTP2Wire.ErrorCode.protocolError.rawValue,
                    debugData: ByteBuffer(string: "bad")
                ),
            ]
        )
    }
}
