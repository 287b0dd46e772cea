/// `apns-id`: a canonical UUID (8-4-4-4-12 hex digits). We send it lower-case, as Apple's examples show.
public struct APNsID: Hashable, Sendable, CustomStringConvertible {
    public let value: String

    public init(_ value: String, field: String = "apns_id") throws(ValidationError) {
        guard Self.isCanonicalUUID(value) else {
            throw ValidationError(
                code: .invalidAPNsID,
                field: field,
                message: "apns-id must be a UUID like 123e4567-e89b-12d3-a456-4266554400a0"
            )
        }
        self.value = value.lowercased()
    }

    /// A random (version 4) UUID from the given generator.
    public init(using generator: inout some RandomNumberGenerator) {
        var high = generator.next() as UInt64
        var low = generator.next() as UInt64
        high = (high & 0xffff_ffff_ffff_0fff) | 0x0000_0000_0000_4000  // version 4
        low = (low & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000  // RFC 4122 variant
        let digits = Array("0123456789abcdef".utf8)
        var bytes = [UInt8]()
        bytes.reserveCapacity(36)
        for (index, word) in [(0, high), (16, low)] {
            for nibble in 0..<16 {
                let position = index + nibble
                if position == 8 || position == 12 || position == 16 || position == 20 {
                    bytes.append(UInt8(ascii: "-"))
                }
                bytes.append(digits[Int((word >> UInt64(60 - nibble * 4)) & 0xf)])
            }
        }
        self.value = String(decoding: bytes, as: UTF8.self)
    }

    static func isCanonicalUUID(_ value: String) -> Bool {
        let utf8 = Array(value.utf8)
        guard utf8.count == 36 else { return false }
        for (index, byte) in utf8.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                if byte != UInt8(ascii: "-") { return false }
            } else {
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
                    UInt8(ascii: "A")...UInt8(ascii: "F"):
                    continue
                default: return false
                }
            }
        }
        return true
    }

    public var description: String { value }
}
