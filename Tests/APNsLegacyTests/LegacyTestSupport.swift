import NIOCore
import PushgateCore

/// Hex (spaces allowed) to bytes, for hand-computed expected encodings.
func bytes(hex: String) -> [UInt8] {
    let digits = Array(hex.utf8.filter { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\n") })
    precondition(digits.count % 2 == 0, "odd hex")
    return stride(from: 0, to: digits.count, by: 2).map {
        UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)!
    }
}

func buffer(hex: String) -> ByteBuffer { ByteBuffer(bytes: bytes(hex: hex)) }

func buffer(_ bytes: [UInt8]) -> ByteBuffer { ByteBuffer(bytes: bytes) }

/// 32 bytes: 00 01 02 … 1f.
let tokenHex = (0..<32).map { (byte: Int) in String(format2: byte) }.joined()

extension String {
    /// Two lower-case hex digits.
    init(format2 byte: Int) {
        let digits = Array("0123456789abcdef")
        self = String([digits[byte >> 4], digits[byte & 0xf]])
    }
}

let token32 = try! DeviceToken(hex: tokenHex)

/// `{"aps":{}}`: 7b 22 61 70 73 22 3a 7b 7d 7d, 10 bytes.
let smallPayload = try! Payload(jsonString: #"{"aps":{}}"#)
let smallPayloadHex = "7b2261707322 3a7b7d7d"

/// A JSON object of exactly `count` bytes (count ≥ 12): `{"a":"xxxx…"}`.
func payload(ofSize count: Int) -> Payload {
    try! Payload(jsonString: #"{"a":""# + String(repeating: "x", count: count - 8) + #""}"#)
}
