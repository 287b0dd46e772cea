/// The `errorCode` values FCM HTTP v1 puts in `error.details[]`, each with the HTTP status Google
/// documents for it. Codes Google adds later arrive as `.unknown` and are classed by their status.
public enum FCMErrorCode: Hashable, Sendable, CustomStringConvertible {
    /// 404: the app was uninstalled or the token expired.
    case unregistered
    /// 400: a bad message, or (when the message says so) a registration token that is not valid.
    case invalidArgument
    /// 403: the token belongs to another sender.
    case senderIDMismatch
    /// 401: the APNs certificate or web-push key configured in Firebase is wrong.
    case thirdPartyAuthError
    /// 429: the project's, or the device's, sending quota is used up.
    case quotaExceeded
    /// 503: the server is overloaded.
    case unavailable
    /// 500: an unknown internal error.
    case `internal`
    /// No more specific code.
    case unspecifiedError
    case unknown(String)

    public static let documented: [FCMErrorCode] = [
        .unregistered, .invalidArgument, .senderIDMismatch, .thirdPartyAuthError, .quotaExceeded, .unavailable,
        .internal, .unspecifiedError,
    ]

    public init(rawValue: String) {
        self = Self.documented.first { $0.rawValue == rawValue } ?? .unknown(rawValue)
    }

    public var rawValue: String {
        switch self {
        case .unregistered: "UNREGISTERED"
        case .invalidArgument: "INVALID_ARGUMENT"
        case .senderIDMismatch: "SENDER_ID_MISMATCH"
        case .thirdPartyAuthError: "THIRD_PARTY_AUTH_ERROR"
        case .quotaExceeded: "QUOTA_EXCEEDED"
        case .unavailable: "UNAVAILABLE"
        case .internal: "INTERNAL"
        case .unspecifiedError: "UNSPECIFIED_ERROR"
        case .unknown(let raw): raw
        }
    }

    /// The HTTP status Google documents for the code; nil for codes without one.
    public var status: Int? {
        switch self {
        case .unregistered: 404
        case .invalidArgument: 400
        case .senderIDMismatch: 403
        case .thirdPartyAuthError: 401
        case .quotaExceeded: 429
        case .unavailable: 503
        case .internal: 500
        case .unspecifiedError, .unknown: nil
        }
    }

    /// The `error.status` (gRPC code name) FCM sends alongside the code.
    public var canonicalStatus: String {
        switch self {
        case .unregistered: "NOT_FOUND"
        case .invalidArgument: "INVALID_ARGUMENT"
        case .senderIDMismatch: "PERMISSION_DENIED"
        case .thirdPartyAuthError: "UNAUTHENTICATED"
        case .quotaExceeded: "RESOURCE_EXHAUSTED"
        case .unavailable: "UNAVAILABLE"
        case .internal: "INTERNAL"
        case .unspecifiedError, .unknown: "UNKNOWN"
        }
    }

    public var description: String { rawValue }
}
