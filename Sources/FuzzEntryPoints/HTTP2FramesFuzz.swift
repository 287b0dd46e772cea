import NIOCore
import PushTransport

/// `HTTP2FrameParser`, as a server's bytes reach it:
/// - the same frames and the same error whatever the read sizes;
/// - once failed, it stays failed with the same error;
/// - DATA never carries more than the window was charged for;
/// - every frame read, written back in the plainest form (no padding beyond what DATA was charged,
///   header blocks cut at the frame size), reads as the same frame.
///
/// The first byte chooses the read size for the split run; the rest is the stream.
enum HTTP2FramesFuzz {
    private static let target = FuzzTarget.http2Frames

    private struct Outcome: Equatable {
        var frames: [HTTP2InboundFrame] = []
        var error: HTTP2ConnectionError?
    }

    static func run(_ input: UnsafeRawBufferPointer) throws(FuzzViolation) {
        guard let first = input.first else { return }
        let stream = [UInt8](input.dropFirst())
        let whole = try parse(stream, readSize: max(stream.count, 1))
        let split = try parse(stream, readSize: Int(first) + 1)
        try expect(whole == split, target, "read \(Int(first) + 1) bytes at a time: \(split) instead of \(whole)")

        for frame in whole.frames {
            if case .data(_, let data, _, let charged) = frame {
                try expect(data.readableBytes <= charged, target, "DATA of \(data.readableBytes) charged \(charged)")
            }
        }
        var written = ByteBuffer()
        for frame in whole.frames { write(frame, into: &written) }
        let again = try parse(Array(written.readableBytesView), readSize: max(written.readableBytes, 1))
        let expected = whole.frames.filter { $0 != .ignored }
        try expect(again == Outcome(frames: expected), target, "written back: \(again) instead of \(expected)")
    }

    private static func parse(_ stream: [UInt8], readSize: Int) throws(FuzzViolation) -> Outcome {
        var parser = HTTP2FrameParser()
        var outcome = Outcome()
        var offset = 0
        reading: while offset < stream.count {
            var piece = ByteBuffer(bytes: stream[offset..<min(offset + readSize, stream.count)])
            offset += readSize
            parser.append(&piece)
            do {
                while let frame = try parser.nextFrame() { outcome.frames.append(frame) }
            } catch {
                outcome.error = error
                break reading
            }
        }
        if let failed = outcome.error {
            let again: HTTP2ConnectionError?
            do {
                _ = try parser.nextFrame()
                again = nil
            } catch {
                again = error
            }
            try expect(again == failed, target, "failed with \(failed), then \(String(describing: again))")
        }
        return outcome
    }

    private static func write(_ frame: HTTP2InboundFrame, into out: inout ByteBuffer) {
        func header(_ length: Int, _ type: HTTP2Wire.FrameType, _ flags: UInt8 = 0, _ streamID: UInt32 = 0) {
            HTTP2Wire.writeFrameHeader(length: length, type: type, flags: flags, streamID: streamID, into: &out)
        }
        switch frame {
        case .headers(let streamID, var block, let endStream):
            var type = HTTP2Wire.FrameType.headers
            var flags = endStream ? HTTP2Wire.Flag.endStream : 0
            repeat {
                var piece = block.readSlice(length: min(block.readableBytes, HTTP2Wire.defaultMaximumFrameSize))!
                let last = block.readableBytes == 0
                header(piece.readableBytes, type, flags | (last ? HTTP2Wire.Flag.endHeaders : 0), streamID)
                out.writeBuffer(&piece)
                type = .continuation
                flags = 0
            } while block.readableBytes > 0
        case .data(let streamID, var data, let endStream, let charged):
            let padding = charged - data.readableBytes
            var flags = endStream ? HTTP2Wire.Flag.endStream : 0
            if padding > 0 { flags |= HTTP2Wire.Flag.padded }
            header(charged, .data, flags, streamID)
            if padding > 0 { out.writeInteger(UInt8(truncatingIfNeeded: padding - 1)) }
            out.writeBuffer(&data)
            if padding > 1 { out.writeRepeatingByte(0, count: padding - 1) }
        case .rstStream(let streamID, let code):
            header(4, .rstStream, 0, streamID)
            out.writeInteger(code)
        case .settings(let settings):
            header(settings.count * 6, .settings)
            for setting in settings {
                out.writeInteger(setting.parameter)
                out.writeInteger(setting.value)
            }
        case .settingsAcknowledged:
            header(0, .settings, HTTP2Wire.Flag.ack)
        case .ping(let opaque, let ack):
            HTTP2Wire.writePing(opaque, acknowledging: ack, into: &out)
        case .goAway(let lastStreamID, let code, var debugData):
            header(8 + debugData.readableBytes, .goAway)
            out.writeInteger(lastStreamID)
            out.writeInteger(code)
            out.writeBuffer(&debugData)
        case .windowUpdate(let streamID, let increment):
            header(4, .windowUpdate, 0, streamID)
            out.writeInteger(increment)
        case .ignored:
            break
        }
    }
}
