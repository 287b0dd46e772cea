/// An APNs device token, kept as its lower-case hexadecimal form (the form APNs' `:path` carries and
/// the registry stores).
///
/// Apple says not to assume a token size. Today's tokens are 32 bytes; the legacy frame format allowed
/// up to 100. We accept 8 to 100 bytes of even-length hex, case-insensitively, and normalise to lower case
/// so that `ABCD…` and `abcd…` are one device.
public struct DeviceToken: Hashable, Sendable, Comparable, CustomStringConvertible {
    public static let minimumByteCount = 8
    public static let maximumByteCount = 100

    /// Lower-case hex, even length, 16 to 200 characters.
    public let hex: String

    public init(hex input: String, field: String = "device") throws(ValidationError) {
        let utf8 = input.utf8
        guard !utf8.isEmpty else {
            throw ValidationError(code: .invalidToken, field: field, message: "device token is empty")
        }
        guard utf8.count % 2 == 0 else {
            throw ValidationError(
                code: .invalidToken,
                field: field,
                message: "device token must have an even number of hex digits (got \(utf8.count))"
            )
        }
        let bytes = utf8.count / 2
        guard bytes >= Self.minimumByteCount, bytes <= Self.maximumByteCount else {
            throw ValidationError(
                code: .invalidToken,
                field: field,
                message:
                    "device token must be \(Self.minimumByteCount) to \(Self.maximumByteCount) bytes (\(Self.minimumByteCount * 2) to \(Self.maximumByteCount * 2) hex digits), got \(utf8.count) digits"
            )
        }
        var needsLowering = false
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): continue
            case UInt8(ascii: "A")...UInt8(ascii: "F"): needsLowering = true
            default:
                throw ValidationError(
                    code: .invalidToken,
                    field: field,
                    message: "device token must be hexadecimal (0-9, a-f)"
                )
            }
        }
        self.hex = needsLowering ? input.lowercased() : input
    }

    /// The raw bytes, as the legacy binary protocol carries them.
    public var bytes: [UInt8] {
        var result = [UInt8]()
        result.reserveCapacity(hex.utf8.count / 2)
        var high: UInt8 = 0
        for (index, byte) in hex.utf8.enumerated() {
            let nibble = byte <= UInt8(ascii: "9") ? byte &- UInt8(ascii: "0") : byte &- UInt8(ascii: "a") &+ 10
            if index % 2 == 0 { high = nibble } else { result.append(high << 4 | nibble) }
        }
        return result
    }

    /// Builds a token from raw bytes (legacy feedback service tuples).
    public init(bytes: some Collection<UInt8>, field: String = "device") throws(ValidationError) {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var hex = ""
        hex.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            hex.unicodeScalars.append(Unicode.Scalar(digits[Int(byte >> 4)]))
            hex.unicodeScalars.append(Unicode.Scalar(digits[Int(byte & 0x0f)]))
        }
        try self.init(hex: hex, field: field)
    }

    /// The first eight hex digits and an ellipsis: what logs at info level and above show.
    public var shortened: String { String(hex.prefix(8)) + "…" }

    public var description: String { shortened }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.hex < rhs.hex }
}
