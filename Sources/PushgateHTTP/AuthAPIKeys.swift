import Crypto
import Foundation
import Synchronization

/// A bearer key of the HTTP API, kept only as the SHA-256 of the key: the configuration stores hashes
/// (or files the daemon hashes at start-up), so the key itself never sits in memory longer than a
/// request takes to check.
public struct APIKey: Sendable, Hashable {
    /// SHA-256 of the key's UTF-8 bytes (32 bytes).
    public let sha256: [UInt8]
    /// The only app this key may act on; nil: every app.
    public let app: String?

    public init(sha256: [UInt8], app: String? = nil) {
        self.sha256 = sha256
        self.app = app
    }

    /// The key for a secret (tests, and files of keys).
    public init(secret: String, app: String? = nil) {
        self.init(sha256: Array(SHA256.hash(data: Data(secret.utf8))), app: app)
    }
}

/// Decides who a request is, from its `Authorization` header. Pure: no clock, no I/O.
package struct APIKeyring: Sendable {
    enum Decision: Hashable, Sendable {
        /// A configured key; `app` is its limit (nil: every app).
        case allowed(app: String?)
        /// No `Authorization: Bearer` header.
        case missing
        /// A bearer key that is not configured.
        case invalid
    }

    private let keys: [APIKey]

    init(_ keys: [APIKey]) {
        self.keys = keys
    }

    var isEmpty: Bool { keys.isEmpty }

    /// Compares the presented key's hash with every configured hash, each comparison in constant time
    /// and all of them always made, so the answer's timing tells nothing about how close a guess was or
    /// which key matched.
    func authenticate(authorization: String?) -> Decision {
        guard let authorization, let secret = Self.bearerKey(authorization) else { return .missing }
        let digest = Array(SHA256.hash(data: Data(secret.utf8)))
        var match: APIKey?
        for key in keys {
            if Self.constantTimeEquals(key.sha256, digest) && match == nil { match = key }
        }
        guard let match else { return .invalid }
        return .allowed(app: match.app)
    }

    /// The key of `Bearer KEY` (the scheme is case-insensitive, RFC 6750), or nil.
    package static func bearerKey(_ header: String) -> Substring? {
        let trimmed = header.drop { $0 == " " }
        guard trimmed.count > 7, trimmed.prefix(7).lowercased() == "bearer " else { return nil }
        let key = trimmed.dropFirst(7).drop { $0 == " " }
        let end = key.lastIndex { $0 != " " }.map { key.index(after: $0) } ?? key.startIndex
        let result = key[..<end]
        return result.isEmpty ? nil : result
    }

    static func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var difference: UInt8 = 0
        for index in lhs.indices { difference |= lhs[index] ^ rhs[index] }
        return difference == 0
    }
}

/// The keyring the API checks with, which a reload replaces (``HTTPAPI/replaceAPIKeys(_:)``): each request
/// reads it once, so a key removed is refused from the next request on.
final class APIKeyringSlot: Sendable {
    private let keyring: Mutex<APIKeyring>

    init(_ keys: [APIKey]) {
        keyring = Mutex(APIKeyring(keys))
    }

    var current: APIKeyring {
        get { keyring.withLock { $0 } }
        set { keyring.withLock { $0 = newValue } }
    }
}
