/// Why FCM credentials could not be read, signed or exchanged. The description is safe to log: it
/// never contains the private key, a JWT or an access token.
public struct FCMCredentialError: Error, Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    private enum Code: Hashable, Sendable {
        case unreadableFile
        case malformedJSON
        case missingField
        case wrongType
        case malformedPrivateKey
        case invalidTokenURI
        case signingFailed
        case exchangeFailed
        case malformedGrant
    }

    private let code: Code
    /// The service-account field concerned, when there is one (`private_key`, `token_uri`...).
    public let field: String?
    /// Safe extra context for `debugDescription` (a path, an error type name, an HTTP status).
    private let detail: String?

    private init(_ code: Code, field: String? = nil, detail: String? = nil) {
        self.code = code
        self.field = field
        self.detail = detail
    }

    /// The service-account file could not be read.
    public static let unreadableFile = Self(.unreadableFile)
    /// The service-account file is not a JSON object.
    public static let malformedJSON = Self(.malformedJSON)
    /// `type` is not `service_account`.
    public static let wrongType = Self(.wrongType, field: "type")
    /// `private_key` is not an RSA private key (2,048 bits or more) in PEM form.
    public static let malformedPrivateKey = Self(.malformedPrivateKey, field: "private_key")
    /// `token_uri` is not an absolute `https` URL.
    public static let invalidTokenURI = Self(.invalidTokenURI, field: "token_uri")
    /// The assertion could not be signed.
    public static let signingFailed = Self(.signingFailed)
    /// The token endpoint could not be reached or refused the assertion.
    public static let exchangeFailed = Self(.exchangeFailed)
    /// The token endpoint answered 200 without a usable `access_token` and `expires_in`.
    public static let malformedGrant = Self(.malformedGrant)

    /// A required field is absent, empty or not a string.
    public static func missingField(_ name: String) -> Self { Self(.missingField, field: name) }

    static func unreadableFile(path: String, detail: String) -> Self {
        Self(.unreadableFile, detail: "\(path): \(detail)")
    }
    static func malformedPrivateKey(detail: String) -> Self {
        Self(.malformedPrivateKey, field: "private_key", detail: detail)
    }
    static func signingFailed(detail: String) -> Self { Self(.signingFailed, detail: detail) }
    /// The exchange failed; `detail` must be safe to log (a status, an error type, an OAuth error code).
    public static func exchangeFailed(detail: String) -> Self { Self(.exchangeFailed, detail: detail) }

    public var description: String {
        switch code {
        case .unreadableFile: "service-account file could not be read"
        case .malformedJSON: "service-account file is not a JSON object"
        case .missingField: "service-account field \(field ?? "?") is missing, empty or not a string"
        case .wrongType: "service-account field type must be \"service_account\""
        case .malformedPrivateKey:
            "service-account field private_key is not an RSA private key (>= 2048 bits) in PEM form"
        case .invalidTokenURI: "service-account field token_uri must be an absolute https URL (http only on loopback)"
        case .signingFailed: "FCM token assertion could not be signed"
        case .exchangeFailed: "FCM access token could not be obtained from token_uri"
        case .malformedGrant: "token endpoint answered without a usable access_token and expires_in"
        }
    }

    public var debugDescription: String {
        guard let detail else { return "FCMCredentialError(\(description))" }
        return "FCMCredentialError(\(description); \(detail))"
    }

    /// Equal when the code and field are equal, whatever the detail.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code && lhs.field == rhs.field }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(field)
    }
}
