import Crypto
public import Foundation

/// A client's name for one notification request (the HTTP API's `Idempotency-Key` header), so that a
/// retry of a request whose answer was lost is recognised instead of stored and sent again.
///
/// 1 to 255 characters of printable ASCII (0x20-0x7E), neither first nor last a space: an HTTP field
/// value loses its leading and trailing spaces on the way (RFC 9110, 5.5), so a key with one could not
/// be the one the client sent. Anything else (control characters, tabs, non-ASCII) is refused, so that a
/// key compares as the bytes it is, with no normalisation to argue about.
public struct IdempotencyKey: Hashable, Sendable, CustomStringConvertible {
    public static let maximumLength = 255
    /// How long a key names its request: a request with the same key and app within this time of the
    /// first is a retry of it; after it, the key is free for a new request.
    public static let window: Duration = .seconds(24 * 60 * 60)

    public let value: String

    /// - Parameter field: the name the error gives the key (the HTTP header's).
    public init(_ value: String, field: String = "Idempotency-Key") throws(ValidationError) {
        let bytes = value.utf8
        guard !bytes.isEmpty, bytes.count <= Self.maximumLength else {
            throw ValidationError(
                code: .invalidIdempotencyKey,
                field: field,
                message: "an idempotency key must be 1 to \(Self.maximumLength) characters"
            )
        }
        guard bytes.allSatisfy({ (0x20...0x7E).contains($0) }) else {
            throw ValidationError(
                code: .invalidIdempotencyKey,
                field: field,
                message: "an idempotency key may only contain printable ASCII characters (space to '~')"
            )
        }
        guard bytes.first != 0x20, bytes.last != 0x20 else {
            throw ValidationError(
                code: .invalidIdempotencyKey,
                field: field,
                message: "an idempotency key may not begin or end with a space"
            )
        }
        self.value = value
    }

    /// Not the key itself: keys are the client's, and have no business in log lines.
    public var description: String { "idempotency key (\(value.utf8.count) characters)" }

    /// Whether a request created at `now` falls within the window of one stored at `storedAt`.
    public static func isWithinWindow(storedAt: Date, now: Date) -> Bool {
        now.timeIntervalSince(storedAt) < TimeInterval(window.components.seconds)
    }
}

/// What a request with an idempotency key is stored with: the key, and a fingerprint of what the client
/// sent under it, so that a retry (same fingerprint) is told apart from a new request that reuses the key
/// (another fingerprint: refused with ``StoreError/Code/idempotencyKeyReused``).
public struct Idempotency: Hashable, Sendable {
    public var key: IdempotencyKey
    /// SHA-256 of the request as the client sent it (32 bytes).
    public var fingerprint: [UInt8]

    public static let fingerprintLength = SHA256.byteCount

    /// The key with the fingerprint of `requestBytes`: the bytes of the request as received (the HTTP
    /// body), not a re-encoding of what was parsed from them (see docs/http.md, "Idempotent requests").
    public init(key: IdempotencyKey, requestBytes: some DataProtocol) {
        self.key = key
        self.fingerprint = Array(SHA256.hash(data: requestBytes))
    }

    /// A stored key and fingerprint.
    public init(key: IdempotencyKey, fingerprint: [UInt8]) {
        self.key = key
        self.fingerprint = fingerprint
    }
}

extension ValidationError.Code {
    public static let invalidIdempotencyKey = ValidationError.Code("invalid_idempotency_key")
}
