import APNsLegacy
import NIOCore
import PushgateCore
import Testing

@Suite("Legacy notification encoder")
struct LegacyNotificationEncoderTests {
    @Test("the simple format is command 0, token length, token, payload length, payload")
    func simpleIsByteExact() throws {
        var out = ByteBuffer()
        let written = try LegacyNotificationEncoder.writeSimple(token: token32, payload: smallPayload, into: &out)
        let expected = bytes(hex: "00 0020" + tokenHex + "000a" + smallPayloadHex)
        #expect(Array(out.readableBytesView) == expected)
        #expect(written == 1 + 2 + 32 + 2 + 10)
    }

    @Test("the enhanced format adds a 4-byte identifier and a 4-byte expiry after command 1")
    func enhancedIsByteExact() throws {
        var out = ByteBuffer()
        try LegacyNotificationEncoder.writeEnhanced(
            identifier: 0xbeef_cace,
            expiration: .at(epochSeconds: 1_600_000_000),
            token: token32,
            payload: smallPayload,
            into: &out
        )
        let expected = bytes(hex: "01 beefcace 5f5e1000 0020" + tokenHex + "000a" + smallPayloadHex)
        #expect(Array(out.readableBytesView) == expected)
    }

    @Test("the enhanced format sends an immediate expiration as 0")
    func enhancedImmediateIsZero() throws {
        var out = ByteBuffer()
        try LegacyNotificationEncoder.writeEnhanced(
            identifier: 1,
            expiration: .immediately,
            token: token32,
            payload: smallPayload,
            into: &out
        )
        #expect(out.getBytes(at: 5, length: 4) == [0, 0, 0, 0])
    }

    @Test("the frame format is command 2, the frame length, then items 1 to 5 in order")
    func frameIsByteExact() throws {
        var out = ByteBuffer()
        let written = try LegacyNotificationEncoder.writeFrame(
            identifier: 0xbeef_cace,
            expiration: .at(epochSeconds: 1_600_000_000),
            priority: .immediate,
            token: token32,
            payload: smallPayload,
            into: &out
        )
        // 3+32 (token) + 3+10 (payload) + 3+4 (identifier) + 3+4 (expiration) + 3+1 (priority) = 66 = 0x42
        let expected = bytes(
            hex: "02 00000042" + "01 0020" + tokenHex + "02 000a" + smallPayloadHex
                + "03 0004 beefcace" + "04 0004 5f5e1000" + "05 0001 0a"
        )
        #expect(Array(out.readableBytesView) == expected)
        #expect(written == 5 + 66)
    }

    @Test("the frame format omits the expiration item for the storage policy and writes priority 5")
    func frameWithoutExpiration() throws {
        var out = ByteBuffer()
        try LegacyNotificationEncoder.writeFrame(
            identifier: 7,
            expiration: .storagePolicy,
            priority: .conservePower,
            token: token32,
            payload: smallPayload,
            into: &out
        )
        let expected = bytes(
            hex: "02 0000003b" + "01 0020" + tokenHex + "02 000a" + smallPayloadHex + "03 0004 00000007"
                + "05 0001 05"
        )
        #expect(Array(out.readableBytesView) == expected)
    }

    @Test("encoders append to what the buffer already holds")
    func appends() throws {
        var out = ByteBuffer(bytes: [0xff])
        try LegacyNotificationEncoder.writeSimple(token: token32, payload: smallPayload, into: &out)
        try LegacyNotificationEncoder.writeSimple(token: token32, payload: smallPayload, into: &out)
        #expect(out.readableBytes == 1 + 2 * 47)
        #expect(out.getInteger(at: 0, as: UInt8.self) == 0xff)
    }

    // MARK: Refusals

    @Test("the simple and enhanced formats carry at most 256 payload bytes")
    func simpleAndEnhancedPayloadLimit() throws {
        var out = ByteBuffer()
        try LegacyNotificationEncoder.writeSimple(token: token32, payload: payload(ofSize: 256), into: &out)
        try LegacyNotificationEncoder.writeEnhanced(
            identifier: 1,
            expiration: .immediately,
            token: token32,
            payload: payload(ofSize: 256),
            into: &out
        )
        let before = out
        #expect(throws: LegacyEncodingError.payloadTooLarge(format: .simple, byteCount: 257)) {
            try LegacyNotificationEncoder.writeSimple(token: token32, payload: payload(ofSize: 257), into: &out)
        }
        #expect(throws: LegacyEncodingError.payloadTooLarge(format: .enhanced, byteCount: 257)) {
            try LegacyNotificationEncoder.writeEnhanced(
                identifier: 1,
                expiration: .immediately,
                token: token32,
                payload: payload(ofSize: 257),
                into: &out
            )
        }
        #expect(out == before, "a refused notification writes nothing")
    }

    @Test("the frame format carries at most 2048 payload bytes")
    func framePayloadLimit() throws {
        var out = ByteBuffer()
        try LegacyNotificationEncoder.writeFrame(
            identifier: 1,
            expiration: .immediately,
            priority: .immediate,
            token: token32,
            payload: payload(ofSize: 2048),
            into: &out
        )
        let before = out
        let error = #expect(throws: LegacyEncodingError.self) {
            try LegacyNotificationEncoder.writeFrame(
                identifier: 1,
                expiration: .immediately,
                priority: .immediate,
                token: token32,
                payload: payload(ofSize: 2049),
                into: &out
            )
        }
        #expect(error == .payloadTooLarge(format: .frame, byteCount: 2049))
        #expect(error?.description == "payload is 2049 bytes; the legacy frame (command 2) format carries at most 2048")
        #expect(out == before)
    }

    @Test("every format refuses a token that is not 32 bytes", arguments: [8, 31, 33, 100])
    func tokenLength(byteCount: Int) throws {
        let token = try DeviceToken(bytes: [UInt8](repeating: 0xab, count: byteCount))
        var out = ByteBuffer()
        let expected = LegacyEncodingError.invalidTokenLength(byteCount: byteCount)
        #expect(throws: expected) {
            try LegacyNotificationEncoder.writeSimple(token: token, payload: smallPayload, into: &out)
        }
        #expect(throws: expected) {
            try LegacyNotificationEncoder.writeEnhanced(
                identifier: 1,
                expiration: .immediately,
                token: token,
                payload: smallPayload,
                into: &out
            )
        }
        #expect(throws: expected) {
            try LegacyNotificationEncoder.writeFrame(
                identifier: 1,
                expiration: .immediately,
                priority: .immediate,
                token: token,
                payload: smallPayload,
                into: &out
            )
        }
        #expect(out.readableBytes == 0)
    }

    @Test("the frame format refuses priority 1")
    func framePriority() {
        var out = ByteBuffer()
        #expect(throws: LegacyEncodingError.unsupportedPriority(rawValue: 1)) {
            try LegacyNotificationEncoder.writeFrame(
                identifier: 1,
                expiration: .immediately,
                priority: .powerSaving,
                token: token32,
                payload: smallPayload,
                into: &out
            )
        }
        #expect(out.readableBytes == 0)
    }

    @Test("an expiration beyond UInt32 is refused", arguments: [Int64(UInt32.max) + 1, -1])
    func expirationRange(seconds: Int64) throws {
        var out = ByteBuffer()
        #expect(throws: LegacyEncodingError.expirationOutOfRange(epochSeconds: seconds)) {
            try LegacyNotificationEncoder.writeEnhanced(
                identifier: 1,
                expiration: .at(epochSeconds: seconds),
                token: token32,
                payload: smallPayload,
                into: &out
            )
        }
        #expect(throws: LegacyEncodingError.expirationOutOfRange(epochSeconds: seconds)) {
            try LegacyNotificationEncoder.writeFrame(
                identifier: 1,
                expiration: .at(epochSeconds: seconds),
                priority: .immediate,
                token: token32,
                payload: smallPayload,
                into: &out
            )
        }
        try LegacyNotificationEncoder.writeEnhanced(
            identifier: 1,
            expiration: .at(epochSeconds: Int64(UInt32.max)),
            token: token32,
            payload: smallPayload,
            into: &out
        )
        #expect(out.getBytes(at: 5, length: 4) == [0xff, 0xff, 0xff, 0xff])
    }

    @Test("the enhanced format refuses the storage policy, which it has no way to express")
    func enhancedNeedsExpiry() {
        var out = ByteBuffer()
        #expect(throws: LegacyEncodingError.expirationRequired(format: .enhanced)) {
            try LegacyNotificationEncoder.writeEnhanced(
                identifier: 1,
                expiration: .storagePolicy,
                token: token32,
                payload: smallPayload,
                into: &out
            )
        }
    }
}
