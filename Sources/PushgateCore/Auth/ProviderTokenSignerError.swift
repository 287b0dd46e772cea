/// Why an APNs provider token could not be made. The description is safe to log: it never contains
/// the key, a token, or the contents of the key file.
public struct ProviderTokenSignerError: Error, Hashable, Sendable, CustomStringConvertible,
    CustomDebugStringConvertible
{
    private enum Code: Hashable, Sendable {
        case malformedKey
        case unreadableKeyFile
        case invalidKeyID
        case invalidTeamID
        case signingFailed
    }

    private let code: Code
    /// Safe extra context for `debugDescription` (a file path, an error type name). Never key material.
    private let detail: String?

    private init(_ code: Code, detail: String? = nil) {
        self.code = code
        self.detail = detail
    }

    /// The key is not a P-256 private key in PEM form (PKCS#8 `PRIVATE KEY`, as Apple's `.p8` files
    /// are, or SEC1 `EC PRIVATE KEY`).
    public static let malformedKey = Self(.malformedKey)
    /// The auth key file could not be read.
    public static let unreadableKeyFile = Self(.unreadableKeyFile)
    /// The key id is empty or contains whitespace, quotes, backslashes or non-ASCII characters.
    public static let invalidKeyID = Self(.invalidKeyID)
    /// The team id is empty or contains whitespace, quotes, backslashes or non-ASCII characters.
    public static let invalidTeamID = Self(.invalidTeamID)
    /// The signature could not be computed.
    public static let signingFailed = Self(.signingFailed)

    static func malformedKey(detail: String) -> Self { Self(.malformedKey, detail: detail) }
    static func unreadableKeyFile(path: String, detail: String) -> Self {
        Self(.unreadableKeyFile, detail: "\(path): \(detail)")
    }
    static func signingFailed(detail: String) -> Self { Self(.signingFailed, detail: detail) }

    public var description: String {
        switch code {
        case .malformedKey: "auth key is not a P-256 private key in PEM form"
        case .unreadableKeyFile: "auth key file could not be read"
        case .invalidKeyID: "key id must be non-empty printable ASCII without whitespace, quotes or backslashes"
        case .invalidTeamID: "team id must be non-empty printable ASCII without whitespace, quotes or backslashes"
        case .signingFailed: "provider token could not be signed"
        }
    }

    public var debugDescription: String {
        guard let detail else { return "ProviderTokenSignerError(\(description))" }
        return "ProviderTokenSignerError(\(description); \(detail))"
    }

    /// Equal when the code is equal, whatever the detail.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
