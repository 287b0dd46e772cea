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
        case exchangeRefused
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
    /// The token endpoint could not be reached, or answered without refusing the credentials (5xx, 429,
    /// a timeout, a dropped connection, an answer that is not OAuth's): an outage, tried again later.
    public static let exchangeFailed = Self(.exchangeFailed)
    /// The token endpoint refused the credentials for good (400/401 with an OAuth error such as
    /// `invalid_grant` or `invalid_client`: a revoked or unknown key, a deleted account).
    public static let exchangeRefused = Self(.exchangeRefused)
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
    /// The endpoint refused the credentials; `detail` must be safe to log (the status and OAuth error code).
    public static func exchangeRefused(detail: String) -> Self { Self(.exchangeRefused, detail: detail) }

    /// Whether trying again cannot help until the configuration changes: the endpoint refused the
    /// credentials, or they cannot be read or signed with. False for an outage (``exchangeFailed``, and a
    /// 200 without a usable grant, which a proxy in the way may answer): that only delays.
    public var isDefinitive: Bool {
        switch code {
        case .exchangeFailed, .malformedGrant: false
        default: true
        }
    }

    /// The safe detail (status and OAuth error code, error type), when there is one.
    public var safeDetail: String? { detail }

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
        case .exchangeRefused: "token_uri refused the service account's credentials"
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
