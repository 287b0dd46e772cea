import NIOCore
import Testing

@testable import APNsHTTP2
@testable import PushTransport

@Suite("HTTP/2 frame parser")
struct HTTP2FrameParserTests {
    func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8]) -> [UInt8] {
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt8(payload.count >> 16))
        buffer.writeInteger(UInt16(truncatingIfNeeded: payload.count))
        buffer.writeInteger(type)
        buffer.writeInteger(flags)
        buffer.writeInteger(stream)
        buffer.writeBytes(payload)
        return Array(buffer.readableBytesView)
    }

    func parseAll(_ bytes: [UInt8], chunk: Int) throws -> [HTTP2InboundFrame] {
        var parser = HTTP2FrameParser()
        var frames: [HTTP2InboundFrame] = []
        var offset = 0
        while offset < bytes.count {
            var piece = ByteBuffer(bytes: bytes[offset..<min(offset + chunk, bytes.count)])
            offset += chunk
            parser.append(&piece)
            while let frame = try parser.nextFrame() { frames.append(frame) }
        }
        return frames
    }

    var conversation: [UInt8] {
        frame(0x4, [0x00, 0x03, 0, 0, 0x03, 0xe8, 0x00, 0x04, 0, 0x01, 0, 0])  // SETTINGS: 1000 streams, 64 KiB window
            + frame(0x4, flags: 0x1, [])  // SETTINGS ack
            // HEADERS without END_HEADERS (":status: 200", then 0x00 literal start)
            + frame(0x1, flags: 0x1, stream: 1, [0x88, 0x00])
            + frame(0x9, stream: 1, [0x07])
            // CONTINUATION ends the block
            + frame(0x9, flags: 0x4, stream: 1, Array("apns-id".utf8).prefix(0) + [0x01, 0x61])
            + frame(0x0, flags: 0x9, stream: 3, [0x02] + Array("{}".utf8) + [0, 0])  // padded DATA with END_STREAM
            + frame(0x1, flags: 0x24, stream: 5, [0, 0, 0, 0, 16, 0x88])  // HEADERS with priority fields
            + frame(0x6, [1, 2, 3, 4, 5, 6, 7, 8])
            + frame(0x8, stream: 0, [0, 0, 0x10, 0])
            + frame(0x3, stream: 7, [0, 0, 0, 7])
            + frame(0x2, stream: 9, [0, 0, 0, 0, 16])  // PRIORITY: ignored
            + frame(0xfa, stream: 9, [1, 2, 3])  // unknown type: ignored
            + frame(0x7, [0, 0, 0, 5, 0, 0, 0, 0] + Array("{\"reason\":\"Shutdown\"}".utf8))
    }

    @Test("the same frames whatever the split", arguments: [1, 2, 7, 9, 10, 64, 100_000])
    func anySplit(chunk: Int) throws {
        let frames = try parseAll(conversation, chunk: chunk)
        #expect(frames.count == 11)
        #expect(frames[0] == .settings([(0x3, 1000), (0x4, 65_536)]))
        #expect(frames[1] == .settingsAcknowledged)
        #expect(
            frames[2]
                == .headers(streamID: 1, block: ByteBuffer(bytes: [0x88, 0x00, 0x07, 0x01, 0x61]), endStream: true)
        )
        #expect(
            frames[3] == .data(streamID: 3, data: ByteBuffer(string: "{}"), endStream: true, flowControlledLength: 5)
        )
        #expect(frames[4] == .headers(streamID: 5, block: ByteBuffer(bytes: [0x88]), endStream: false))
        #expect(frames[5] == .ping(0x0102_0304_0506_0708, ack: false))
        #expect(frames[6] == .windowUpdate(streamID: 0, increment: 4096))
        #expect(frames[7] == .rstStream(streamID: 7, errorCode: 7))
        #expect(frames[8] == .ignored)
        #expect(frames[9] == .ignored)
        #expect(
            frames[10]
                == .goAway(lastStreamID: 5, errorCode: 0, debugData: ByteBuffer(string: "{\"reason\":\"Shutdown\"}"))
        )
    }

    @Test(
        "a broken server is a connection error with the right code",
        arguments: [
            (
                "frame above SETTINGS_MAX_FRAME_SIZE", [0x00, 0x40, 0x01, 0x00, 0, 0, 0, 0, 1],
                HTTP2Wire.ErrorCode.frameSizeError
            ),
            ("SETTINGS on a stream", [0, 0, 0, 0x4, 0, 0, 0, 0, 1], .protocolError),
            ("SETTINGS of 5 bytes", [0, 0, 5, 0x4, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0], .frameSizeError),
            ("ENABLE_PUSH 2", [0, 0, 6, 0x4, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 2], .protocolError),
            ("INITIAL_WINDOW_SIZE 2^31", [0, 0, 6, 0x4, 0, 0, 0, 0, 0, 0, 4, 0x80, 0, 0, 0], .flowControlError),
            ("MAX_FRAME_SIZE below 16384", [0, 0, 6, 0x4, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0x10, 0], .protocolError),
            ("PUSH_PROMISE", [0, 0, 4, 0x5, 0x4, 0, 0, 0, 1, 0, 0, 0, 2], .protocolError),
            ("CONTINUATION alone", [0, 0, 1, 0x9, 0x4, 0, 0, 0, 1, 0x88], .protocolError),
            ("PING of 7 bytes", [0, 0, 7, 0x6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7], .frameSizeError),
            ("WINDOW_UPDATE of 0", [0, 0, 4, 0x8, 0, 0, 0, 0, 0, 0, 0, 0, 0], .protocolError),
            ("DATA on stream 0", [0, 0, 1, 0x0, 0, 0, 0, 0, 0, 0x61], .protocolError),
            ("padding longer than the frame", [0, 0, 2, 0x0, 0x8, 0, 0, 0, 1, 5, 0x61], .protocolError),
            ("RST_STREAM of 3 bytes", [0, 0, 3, 0x3, 0, 0, 0, 0, 1, 0, 0, 0], .frameSizeError),
            ("GOAWAY of 4 bytes", [0, 0, 4, 0x7, 0, 0, 0, 0, 0, 0, 0, 0, 1], .frameSizeError),
        ] as [(String, [UInt8], HTTP2Wire.ErrorCode)]
    )
    func connectionErrors(_ name: String, bytes: [UInt8], code: HTTP2Wire.ErrorCode) {
        var parser = HTTP2FrameParser()
        var buffer = ByteBuffer(bytes: bytes)
        parser.append(&buffer)
        #expect(throws: HTTP2ConnectionError.self) { _ = try parser.nextFrame() }
        do {
            _ = try parser.nextFrame()
            Issue.record("\(name): the parser should stay failed")
        } catch {
            #expect(error.code == code, "\(name)")
        }
    }

    @Test("another frame in the middle of a header block is a connection error")
    func interleavedContinuation() {
        var parser = HTTP2FrameParser()
        var buffer = ByteBuffer(bytes: frame(0x1, stream: 1, [0x88]) + frame(0x6, [0, 0, 0, 0, 0, 0, 0, 0]))
        parser.append(&buffer)
        #expect(throws: HTTP2ConnectionError(code: .protocolError, message: "expected CONTINUATION of stream 1")) {
            _ = try parser.nextFrame()
        }
    }
}
