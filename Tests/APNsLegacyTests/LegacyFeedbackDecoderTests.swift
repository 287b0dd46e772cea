import APNsLegacy
import Foundation
import NIOCore
import NIOEmbedded
import NIOTestUtils
import PushgateCore
import Testing

@Suite("Legacy feedback decoder")
struct LegacyFeedbackDecoderTests {
    @Test("a tuple is a 4-byte timestamp, a 2-byte token length and the token")
    func byteExact() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(LegacyFeedbackDecoder()))
        try channel.writeInbound(buffer(hex: "5f5e1000 0020" + tokenHex))
        let tuple = try #require(try channel.readInbound(as: LegacyFeedbackTuple.self))
        #expect(tuple.token == token32)
        #expect(tuple.timestampSeconds == 1_600_000_000)
        #expect(tuple.timestamp == Date(timeIntervalSince1970: 1_600_000_000))
        #expect(try channel.finish().isClean)

        var encoded = ByteBuffer()
        #expect(tuple.write(into: &encoded) == 38)
        #expect(Array(encoded.readableBytesView) == bytes(hex: "5f5e1000 0020" + tokenHex))
    }

    @Test("tuples of every token size decode in every split")
    func everySplit() throws {
        var pairs: [(ByteBuffer, [LegacyFeedbackTuple])] = []
        for (index, size) in [8, 32, 64, 100].enumerated() {
            let token = try DeviceToken(bytes: (0..<size).map { UInt8(($0 * 7 + index) & 0xff) })
            let tuple = LegacyFeedbackTuple(timestampSeconds: UInt32(1_700_000_000 + index), token: token)
            var encoded = ByteBuffer()
            tuple.write(into: &encoded)
            pairs.append((encoded, [tuple]))
        }
        try ByteToMessageDecoderVerifier.verifyDecoder(inputOutputPairs: pairs) { LegacyFeedbackDecoder() }
    }

    @Test("several tuples in one read, then one split in the middle of its token")
    func severalAndSplitMidToken() throws {
        let tokens = try (1...3).map { seed in try DeviceToken(bytes: [UInt8](repeating: UInt8(seed), count: 32)) }
        var stream = ByteBuffer()
        for (index, token) in tokens.enumerated() {
            LegacyFeedbackTuple(timestampSeconds: UInt32(1000 + index), token: token).write(into: &stream)
        }
        // The first read ends 10 bytes into the third tuple's token.
        let cut = 2 * 38 + 6 + 10
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(LegacyFeedbackDecoder()))
        try channel.writeInbound(stream.getSlice(at: 0, length: cut)!)
        #expect(try channel.readInbound(as: LegacyFeedbackTuple.self)?.token == tokens[0])
        #expect(try channel.readInbound(as: LegacyFeedbackTuple.self)?.token == tokens[1])
        #expect(try channel.readInbound(as: LegacyFeedbackTuple.self) == nil)
        try channel.writeInbound(stream.getSlice(at: cut, length: stream.readableBytes - cut)!)
        let last = try #require(try channel.readInbound(as: LegacyFeedbackTuple.self))
        #expect(last == LegacyFeedbackTuple(timestampSeconds: 1002, token: tokens[2]))
        #expect(try channel.finish().isClean)
    }

    @Test("a token length outside 8 to 100 bytes is a decoding error", arguments: [0, 7, 101, 0xffff])
    func impossibleTokenLength(length: Int) throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(LegacyFeedbackDecoder()))
        var input = ByteBuffer()
        input.writeInteger(UInt32(1))
        input.writeInteger(UInt16(length))
        #expect(throws: LegacyDecodingError.invalidFeedbackTokenLength(length)) { try channel.writeInbound(input) }
        _ = try? channel.finish()
    }

    @Test("a tuple cut by the server closing is reported as truncated")
    func truncated() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(LegacyFeedbackDecoder()))
        try channel.writeInbound(buffer(hex: "5f5e1000 0020 0001"))
        #expect(throws: LegacyDecodingError.truncated(remainingBytes: 8)) { _ = try channel.finish() }
    }
}
