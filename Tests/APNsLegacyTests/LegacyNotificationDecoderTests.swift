import APNsLegacy
import NIOCore
import NIOEmbedded
import NIOTestUtils
import PushgateCore
import Testing

@Suite("Legacy notification decoder")
struct LegacyNotificationDecoderTests {
    /// One notification per format, encoded by the encoder, with what the decoder must produce.
    static func encodedSamples() throws -> [(ByteBuffer, [LegacyNotification])] {
        let tokenBytes = token32.bytes
        var simple = ByteBuffer()
        try LegacyNotificationEncoder.writeSimple(token: token32, payload: smallPayload, into: &simple)
        var enhanced = ByteBuffer()
        try LegacyNotificationEncoder.writeEnhanced(
            identifier: 0xbeef_cace,
            expiration: .at(epochSeconds: 1_600_000_000),
            token: token32,
            payload: payload(ofSize: 256),
            into: &enhanced
        )
        var frame = ByteBuffer()
        try LegacyNotificationEncoder.writeFrame(
            identifier: 42,
            expiration: .immediately,
            priority: .conservePower,
            token: token32,
            payload: payload(ofSize: 2048),
            into: &frame
        )
        var frameNoExpiry = ByteBuffer()
        try LegacyNotificationEncoder.writeFrame(
            identifier: 43,
            expiration: .storagePolicy,
            priority: .immediate,
            token: token32,
            payload: smallPayload,
            into: &frameNoExpiry
        )
        return [
            (simple, [LegacyNotification(format: .simple, token: tokenBytes, payload: smallPayload.bytes)]),
            (
                enhanced,
                [
                    LegacyNotification(
                        format: .enhanced,
                        identifier: 0xbeef_cace,
                        expiry: 1_600_000_000,
                        token: tokenBytes,
                        payload: payload(ofSize: 256).bytes
                    )
                ]
            ),
            (
                frame,
                [
                    LegacyNotification(
                        format: .frame,
                        identifier: 42,
                        expiry: 0,
                        token: tokenBytes,
                        payload: payload(ofSize: 2048).bytes,
                        priority: 5
                    )
                ]
            ),
            (
                frameNoExpiry,
                [
                    LegacyNotification(
                        format: .frame,
                        identifier: 43,
                        token: tokenBytes,
                        payload: smallPayload.bytes,
                        priority: 10
                    )
                ]
            ),
        ]
    }

    @Test("every format round-trips through the decoder in every split")
    func roundTripsInEverySplit() throws {
        try ByteToMessageDecoderVerifier.verifyDecoder(inputOutputPairs: Self.encodedSamples()) {
            LegacyNotificationDecoder()
        }
    }

    @Test("hand-written frames decode: items in any order, optional items absent, any token and payload size")
    func handWrittenFrames() throws {
        let pairs: [(ByteBuffer, [LegacyNotification])] = [
            // payload, then token, no identifier, expiry or priority
            (
                buffer(hex: "02 0000000a 02 0002 7b7d 01 0002 abcd"),
                [LegacyNotification(format: .frame, token: [0xab, 0xcd], payload: [0x7b, 0x7d])]
            ),
            // priority first, then identifier, token, payload, expiry; priority 7 is structure-valid
            (
                buffer(hex: "02 0000001c 05 0001 07 03 0004 00000009 01 0001 ff 02 0003 616263 04 0004 00000001"),
                [
                    LegacyNotification(
                        format: .frame,
                        identifier: 9,
                        expiry: 1,
                        token: [0xff],
                        payload: Array("abc".utf8),
                        priority: 7
                    )
                ]
            ),
            // a simple notification with an empty token and payload is structure-valid (the gateway answers 2)
            (buffer(hex: "00 0000 0000"), [LegacyNotification(format: .simple, token: [], payload: [])]),
        ]
        try ByteToMessageDecoderVerifier.verifyDecoder(inputOutputPairs: pairs) { LegacyNotificationDecoder() }
    }

    @Test("the three formats mixed in one buffer decode in order")
    func mixedFormatsInOneBuffer() throws {
        let samples = try Self.encodedSamples()
        var all = ByteBuffer()
        for var (input, _) in samples { all.writeBuffer(&input) }
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(LegacyNotificationDecoder()))
        try channel.writeInbound(all)
        for (_, expected) in samples {
            #expect(try channel.readInbound(as: LegacyNotification.self) == expected[0])
        }
        #expect(try channel.readInbound(as: LegacyNotification.self) == nil)
        #expect(try channel.finish().isClean)
    }

    // MARK: Malformed input

    static let malformed: [(hex: String, error: LegacyDecodingError)] = [
        ("09 0000", .unexpectedCommand(9, expected: [0, 1, 2])),
        ("08 08 00000001", .unexpectedCommand(8, expected: [0, 1, 2])),
        // unknown item 6, after the identifier was read
        ("02 0000000f 03 0004 00000005 06 0001 00 01 0001 ff", .unknownItem(id: 6, identifier: 5)),
        // item 2 declares 16 bytes, 3 remain
        ("02 00000006 02 0010 7b7d7d", .itemOverrunsFrame(id: 2, length: 19, remaining: 6)),
        // an item header cut by the frame end
        ("02 00000006 01 0001 ff 02 00", .itemOverrunsFrame(id: 2, length: 3, remaining: 2)),
        // identifier of 2 bytes
        ("02 00000005 03 0002 0001", .invalidItemLength(.notificationIdentifier, length: 2)),
        ("02 00000005 05 0002 0a0a", .invalidItemLength(.priority, length: 2)),
        ("02 00000006 04 0003 000000", .invalidItemLength(.expirationDate, length: 3)),
        // two tokens
        ("02 00000008 01 0001 ff 01 0001 ee", .duplicateItem(.deviceToken)),
        // no token; identifier 3 known
        ("02 0000000c 03 0004 00000003 02 0002 7b7d", .missingItem(.deviceToken, identifier: 3)),
        // no payload
        ("02 00000004 01 0001 ff", .missingItem(.payload)),
        ("02 00000000", .missingItem(.deviceToken)),
    ]

    @Test("malformed input is a clear decoding error", arguments: 0..<Self.malformed.count)
    func malformedInput(index: Int) throws {
        let (hex, expected) = Self.malformed[index]
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(LegacyNotificationDecoder()))
        let error = #expect(throws: LegacyDecodingError.self) { try channel.writeInbound(buffer(hex: hex)) }
        #expect(error == expected)
        #expect(error?.notificationIdentifier == expected.notificationIdentifier)
        _ = try? channel.finish()
    }

    @Test("a frame longer than the limit is refused from its header, before it is buffered")
    func frameTooLong() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(LegacyNotificationDecoder(maximumFrameLength: 100)))
        #expect(throws: LegacyDecodingError.frameTooLong(length: 101, limit: 100)) {
            try channel.writeInbound(buffer(hex: "02 00000065"))
        }
        _ = try? channel.finish()
    }

    @Test("the stream ending inside a notification is reported as truncated")
    func truncated() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(LegacyNotificationDecoder()))
        try channel.writeInbound(buffer(hex: "01 00000001 00000000 0020 0001"))
        #expect(throws: LegacyDecodingError.truncated(remainingBytes: 13)) { _ = try channel.finish() }
    }

    @Test("decoding error descriptions name the problem")
    func descriptions() {
        #expect(
            LegacyDecodingError.unexpectedCommand(9, expected: [0, 1, 2]).description
                == "unexpected command byte 9; expected 0 or 1 or 2"
        )
        #expect(LegacyDecodingError.missingItem(.payload).description == "frame has no payload (2) item")
        #expect(
            LegacyDecodingError.invalidItemLength(.priority, length: 2).description
                == "frame item priority (5) has length 2; it must be 1"
        )
    }
}
