/// How an APNs answer (or a failure to get one) must be handled.
public enum OutcomeClass: String, Hashable, Sendable, CustomStringConvertible {
    /// Delivered to APNs (200).
    case accepted
    /// Permanent: retrying the same request cannot succeed. 410 carries the invalidation time.
    case rejected
    /// Temporary: throttling, 5xx, a stream refused or cut by GOAWAY, a lost connection. Retry later,
    /// with back-off, until the notification expires.
    case retryable
    /// The connection itself is unusable (expired provider token, GOAWAY, TLS failure, `Shutdown`):
    /// retire it and retry the request on another connection.
    case connectionFatal = "connection_fatal"

    public var description: String { rawValue }
}

/// The `reason` strings of APNs error responses, each with its HTTP status and outcome class.
/// Reasons Apple adds later arrive as `.unknown` and are classed by their status.
public enum APNsReason: Hashable, Sendable, CustomStringConvertible {
    // 400
    case badCollapseID, badDeviceToken, badExpirationDate, badMessageID, badPriority, badTopic
    case deviceTokenNotForTopic, duplicateHeaders, idleTimeout, invalidPushType, missingDeviceToken
    case missingTopic, payloadEmpty, topicDisallowed
    // 403
    case badCertificate, badCertificateEnvironment, expiredProviderToken, forbidden, invalidProviderToken
    case missingProviderToken, unrelatedKeyIDInToken, badEnvironmentKeyIDInToken
    // 404, 405
    case badPath, methodNotAllowed
    // 410
    case expiredToken, unregistered
    // 413
    case payloadTooLarge
    // 429
    case tooManyProviderTokenUpdates, tooManyRequests
    // 500, 503
    case internalServerError, serviceUnavailable, shutdown
    case unknown(String)

    /// Every documented reason, for tables and tests.
    public static let documented: [APNsReason] = [
        .badCollapseID, .badDeviceToken, .badExpirationDate, .badMessageID, .badPriority, .badTopic,
        .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
        .missingTopic, .payloadEmpty, .topicDisallowed,
        .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden, .invalidProviderToken,
        .missingProviderToken, .unrelatedKeyIDInToken, .badEnvironmentKeyIDInToken,
        .badPath, .methodNotAllowed, .expiredToken, .unregistered, .payloadTooLarge,
        .tooManyProviderTokenUpdates, .tooManyRequests, .internalServerError, .serviceUnavailable, .shutdown,
    ]

    private static let byString: [String: APNsReason] = {
        var table = [String: APNsReason]()
        for reason in documented { table[reason.rawValue] = reason }
        // Apple's table spells it `BadEnvironmentKeyIdInToken`; APNSwift reports servers sending
        // `BadEnvironmentKeyInToken`. Accept both on the wire.
        table["BadEnvironmentKeyInToken"] = .badEnvironmentKeyIDInToken
        return table
    }()

    public init(rawValue: String) {
        self = Self.byString[rawValue] ?? .unknown(rawValue)
    }

    /// The exact string APNs sends.
    public var rawValue: String {
        switch self {
        case .badCollapseID: "BadCollapseId"
        case .badDeviceToken: "BadDeviceToken"
        case .badExpirationDate: "BadExpirationDate"
        case .badMessageID: "BadMessageId"
        case .badPriority: "BadPriority"
        case .badTopic: "BadTopic"
        case .deviceTokenNotForTopic: "DeviceTokenNotForTopic"
        case .duplicateHeaders: "DuplicateHeaders"
        case .idleTimeout: "IdleTimeout"
        case .invalidPushType: "InvalidPushType"
        case .missingDeviceToken: "MissingDeviceToken"
        case .missingTopic: "MissingTopic"
        case .payloadEmpty: "PayloadEmpty"
        case .topicDisallowed: "TopicDisallowed"
        case .badCertificate: "BadCertificate"
        case .badCertificateEnvironment: "BadCertificateEnvironment"
        case .expiredProviderToken: "ExpiredProviderToken"
        case .forbidden: "Forbidden"
        case .invalidProviderToken: "InvalidProviderToken"
        case .missingProviderToken: "MissingProviderToken"
        case .unrelatedKeyIDInToken: "UnrelatedKeyIdInToken"
        case .badEnvironmentKeyIDInToken: "BadEnvironmentKeyIdInToken"
        case .badPath: "BadPath"
        case .methodNotAllowed: "MethodNotAllowed"
        case .expiredToken: "ExpiredToken"
        case .unregistered: "Unregistered"
        case .payloadTooLarge: "PayloadTooLarge"
        case .tooManyProviderTokenUpdates: "TooManyProviderTokenUpdates"
        case .tooManyRequests: "TooManyRequests"
        case .internalServerError: "InternalServerError"
        case .serviceUnavailable: "ServiceUnavailable"
        case .shutdown: "Shutdown"
        case .unknown(let raw): raw
        }
    }

    /// The HTTP status Apple documents for this reason (nil for unknown reasons).
    public var status: Int? {
        switch self {
        case .badCollapseID, .badDeviceToken, .badExpirationDate, .badMessageID, .badPriority, .badTopic,
            .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
            .missingTopic, .payloadEmpty, .topicDisallowed:
            400
        case .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden, .invalidProviderToken,
            .missingProviderToken, .unrelatedKeyIDInToken, .badEnvironmentKeyIDInToken:
            403
        case .badPath: 404
        case .methodNotAllowed: 405
        case .expiredToken, .unregistered: 410
        case .payloadTooLarge: 413
        case .tooManyProviderTokenUpdates, .tooManyRequests: 429
        case .internalServerError: 500
        case .serviceUnavailable, .shutdown: 503
        case .unknown: nil
        }
    }

    /// How a request answered with this reason is handled.
    ///
    /// - `IdleTimeout`, `Shutdown`, `ExpiredProviderToken`, `TooManyProviderTokenUpdates` say the
    ///   connection (or its token) is the problem, not the notification: connection-fatal.
    /// - `TooManyRequests`, 500 and 503 are temporary: retryable with back-off.
    /// - Everything else cannot succeed by resending the same request: rejected.
    public var outcomeClass: OutcomeClass {
        switch self {
        case .idleTimeout, .shutdown, .expiredProviderToken, .tooManyProviderTokenUpdates: .connectionFatal
        case .tooManyRequests, .internalServerError, .serviceUnavailable: .retryable
        case .unknown: .rejected
        default: .rejected
        }
    }

    /// Whether this answer means the device token is dead (for the environment it was sent to) and
    /// should leave the registry.
    public var invalidatesDevice: Bool {
        switch self {
        case .unregistered, .expiredToken, .badDeviceToken: true
        default: false
        }
    }

    public var description: String { rawValue }

    /// The class of an answer from its status and optional reason. An unknown reason is classed by
    /// its status: 429 and 5xx retry, anything else is a rejection.
    public static func classify(status: Int, reason: APNsReason?) -> OutcomeClass {
        if status == 200 { return .accepted }
        if let reason, case .unknown = reason {
            return status == 429 || status >= 500 ? .retryable : .rejected
        }
        if let reason { return reason.outcomeClass }
        return status == 429 || status >= 500 ? .retryable : .rejected
    }
}
