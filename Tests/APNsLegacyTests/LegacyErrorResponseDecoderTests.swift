import APNsLegacy
import NIOCore
import NIOEmbedded
import NIOTestUtils
import Testing

@Suite("Legacy error response")
struct LegacyErrorResponseDecoderTests {
    static let documented: [(UInt8, LegacyErrorStatus, String)] = [
        (0, .noErrors, "No errors encountered"),
        (1, .processingError, "Processing error"),
        (2, .missingDeviceToken, "Missing device token"),
        (3, .missingTopic, "Missing topic"),
        (4, .missingPayload, "Missing payload"),
        (5, .invalidTokenSize, "Invalid token size"),
        (6, .invalidTopicSize, "Invalid topic size"),
        (7, .invalidPayloadSize, "Invalid payload size"),
        (8, .invalidToken, "Invalid token"),
        (10, .shutdown, "Shutdown"),
        (128, .protocolError, "Protocol error"),
        (255, .unknownError, "None (unknown)"),
    ]

    @Test("every documented status decodes with its meaning", arguments: 0..<Self.documented.count)
    func documentedStatus(index: Int) throws {
        let (raw, status, meaning) = Self.documented[index]
        #expect(LegacyErrorStatus(rawValue: raw) == status)
        #expect(status.rawValue == raw)
        #expect(status.meaning == meaning)
        let input = buffer(hex: "08" + String(format2: Int(raw)) + "00 01 e2 40")
        try ByteToMessageDecoderVerifier.verifyDecoder(
            inputOutputPairs: [(input, [LegacyErrorResponse(status: status, identifier: 123_456)])]
        ) { LegacyErrorResponseDecoder() }
    }

    @Test("the documented list is complete and in wire order")
    func documentedList() {
        #expect(LegacyErrorStatus.documented == Self.documented.map(\.1))
    }

    @Test("undocumented statuses are kept raw", arguments: [UInt8(9), 11, 127, 129, 254])
    func undocumentedStatus(raw: UInt8) {
        let status = LegacyErrorStatus(rawValue: raw)
        #expect(status == .unknown(raw))
        #expect(status.rawValue == raw)
        #expect(status.description == "\(raw) Undocumented status")
    }

    @Test("responses decode in every split, several at once included")
    func everySplit() throws {
        var pairs: [(ByteBuffer, [LegacyErrorResponse])] = []
        for (index, status) in (LegacyErrorStatus.documented + [.unknown(42)]).enumerated() {
            let response = LegacyErrorResponse(status: status, identifier: UInt32(index) &* 0x0101_0101)
            var encoded = ByteBuffer()
            #expect(response.write(into: &encoded) == 6)
            pairs.append((encoded, [response]))
        }
        try ByteToMessageDecoderVerifier.verifyDecoder(inputOutputPairs: pairs) { LegacyErrorResponseDecoder() }
    }

    @Test("the encoded response is byte-exact")
    func byteExact() {
        var out = ByteBuffer()
        LegacyErrorResponse(status: .shutdown, identifier: 0xbeef_cace).write(into: &out)
        #expect(Array(out.readableBytesView) == bytes(hex: "08 0a beefcace"))
    }

    @Test("a command byte other than 8 is a decoding error")
    func wrongCommand() {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(LegacyErrorResponseDecoder()))
        #expect(throws: LegacyDecodingError.unexpectedCommand(1, expected: [8])) {
            try channel.writeInbound(buffer(hex: "01"))
        }
        _ = try? channel.finish()
    }

    @Test("a response cut by the end of the stream is reported as truncated")
    func truncated() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(LegacyErrorResponseDecoder()))
        try channel.writeInbound(buffer(hex: "08 08 0000"))
        #expect(throws: LegacyDecodingError.truncated(remainingBytes: 4)) { _ = try channel.finish() }
    }
}
