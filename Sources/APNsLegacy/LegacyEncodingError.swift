public import PushgateCore

/// A notification the legacy binary protocol cannot carry. Nothing is written when this is thrown.
///
/// Equality is on the code. `description` names the problem and the limit; it never contains the token
/// or the payload.
public struct LegacyEncodingError: Error, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    private enum Code: Hashable {
        case payloadTooLarge(format: LegacyFormat, byteCount: Int, limit: Int)
        case invalidTokenLength(byteCount: Int, expected: Int)
        case unsupportedPriority(rawValue: Int)
        case expirationOutOfRange(epochSeconds: Int64)
        case expirationRequired(format: LegacyFormat)
    }

    private let code: Code

    private init(_ code: Code) {
        self.code = code
    }

    /// The payload is over `format.maximumPayloadBytes`.
    public static func payloadTooLarge(format: LegacyFormat, byteCount: Int) -> Self {
        .init(.payloadTooLarge(format: format, byteCount: byteCount, limit: format.maximumPayloadBytes))
    }

    /// The token is not `LegacyFormat.tokenByteCount` (32) bytes.
    public static func invalidTokenLength(byteCount: Int) -> Self {
        .init(.invalidTokenLength(byteCount: byteCount, expected: LegacyFormat.tokenByteCount))
    }

    /// The frame format carries priorities 10 and 5 only.
    public static func unsupportedPriority(rawValue: Int) -> Self {
        .init(.unsupportedPriority(rawValue: rawValue))
    }

    /// The expiration does not fit the 4-byte unsigned UNIX time the protocol carries.
    public static func expirationOutOfRange(epochSeconds: Int64) -> Self {
        .init(.expirationOutOfRange(epochSeconds: epochSeconds))
    }

    /// The format always carries an expiry, so "leave it to APNs' storage policy" has no encoding.
    public static func expirationRequired(format: LegacyFormat) -> Self {
        .init(.expirationRequired(format: format))
    }

    /// The provider API's reason for the same refusal, for the outcome of a notification the sender
    /// could not encode.
    public var apnsReason: APNsReason {
        switch self.code {
        case .payloadTooLarge: .payloadTooLarge
        case .invalidTokenLength: .badDeviceToken
        case .unsupportedPriority: .badPriority
        case .expirationOutOfRange, .expirationRequired: .badExpirationDate
        }
    }

    public var description: String {
        switch self.code {
        case .payloadTooLarge(let format, let byteCount, let limit):
            "payload is \(byteCount) bytes; the legacy \(format) format carries at most \(limit)"
        case .invalidTokenLength(let byteCount, let expected):
            "device token is \(byteCount) bytes; the legacy gateway accepts exactly \(expected)"
        case .unsupportedPriority(let rawValue):
            "priority \(rawValue) cannot be sent over the legacy frame format (only 10 and 5)"
        case .expirationOutOfRange(let seconds):
            "expiration \(seconds) does not fit the legacy protocol's 4-byte UNIX time (0 to \(UInt32.max))"
        case .expirationRequired(let format):
            "the legacy \(format) format always carries an expiry; use an explicit expiration or the frame format"
        }
    }

    public var debugDescription: String { "LegacyEncodingError(\(self.description))" }
}
