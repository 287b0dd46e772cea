import PushgateCore
import Testing

@Suite("Device tokens")
struct DeviceTokenTests {
    let hex32 = String(repeating: "0123456789abcdef", count: 4)

    @Test("a 32-byte lower-case hex token is accepted as is")
    func validToken() throws {
        let token = try DeviceToken(hex: hex32)
        #expect(token.hex == hex32)
        #expect(token.bytes.count == 32)
    }

    @Test("upper-case hex is normalised to lower case, so both spellings are one device")
    func upperCaseNormalised() throws {
        let upper = try DeviceToken(hex: hex32.uppercased())
        let mixed = try DeviceToken(hex: "0123456789ABCDEF" + String(hex32.dropFirst(16)))
        #expect(upper.hex == hex32)
        #expect(upper == (try DeviceToken(hex: hex32)))
        #expect(mixed.hex == hex32)
        #expect(Set([upper, mixed]).count == 1)
    }

    @Test("an odd number of digits is refused")
    func oddLength() {
        #expect(throws: ValidationError(code: .invalidToken, field: "device", message: "")) {
            try DeviceToken(hex: String(hex32.dropLast()))
        }
    }

    @Test("non-hex characters are refused", arguments: ["g", " ", "-", "é", "\0", "x"])
    func nonHex(character: String) {
        let bad = String(hex32.dropLast(2)) + character + (character.utf8.count == 1 ? "0" : "")
        #expect(throws: ValidationError(code: .invalidToken, field: "device", message: "")) {
            try DeviceToken(hex: bad)
        }
    }

    @Test("tokens from 8 to 100 bytes are accepted; shorter, longer and empty ones are refused")
    func lengthLimits() throws {
        #expect(throws: ValidationError.self) { try DeviceToken(hex: "") }
        #expect(throws: ValidationError.self) { try DeviceToken(hex: String(repeating: "ab", count: 7)) }
        _ = try DeviceToken(hex: String(repeating: "ab", count: 8))
        _ = try DeviceToken(hex: String(repeating: "ab", count: 100))
        #expect(throws: ValidationError.self) { try DeviceToken(hex: String(repeating: "ab", count: 101)) }
    }

    @Test("the error names the field the caller gave")
    func fieldName() {
        #expect(throws: ValidationError(code: .invalidToken, field: "devices[3]", message: "")) {
            try DeviceToken(hex: "zz", field: "devices[3]")
        }
    }

    @Test("bytes round-trip through the hex form")
    func bytesRoundTrip() throws {
        let bytes: [UInt8] = [0x00, 0xff, 0x10, 0xab, 0x7f, 0x80, 0x01, 0xfe, 0x9a]
        let token = try DeviceToken(bytes: bytes)
        #expect(token.hex == "00ff10ab7f8001fe9a")
        #expect(token.bytes == bytes)
        let everyByte = (0...255).map { UInt8($0) }.prefix(100)
        #expect(try DeviceToken(bytes: everyByte).bytes == Array(everyByte))
        #expect(try DeviceToken(hex: hex32.uppercased()).bytes == (try DeviceToken(hex: hex32)).bytes)
    }

    @Test("raw bytes outside 8 to 100 are refused")
    func bytesLimits() {
        #expect(throws: ValidationError.self) { try DeviceToken(bytes: [UInt8]()) }
        #expect(throws: ValidationError.self) { try DeviceToken(bytes: [UInt8](repeating: 1, count: 7)) }
        #expect(throws: ValidationError.self) { try DeviceToken(bytes: [UInt8](repeating: 1, count: 101)) }
    }

    @Test("logs show the token shortened to 8 digits")
    func shortened() throws {
        let token = try DeviceToken(hex: hex32)
        #expect(token.shortened == "01234567…")
        #expect("\(token)" == "01234567…")
        #expect(!"\(token)".contains(hex32))
    }

    @Test("the request path is /3/device/ and the hex token")
    func requestPath() throws {
        #expect(try DeviceToken(hex: hex32.uppercased()).requestPath == "/3/device/" + hex32)
    }

    @Test("tokens order by their hex form")
    func ordering() throws {
        #expect(try DeviceToken(hex: "00000000000000aa") < (try DeviceToken(hex: "00000000000000ab")))
    }
}
