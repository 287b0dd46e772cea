/// The reasons APNs gives in a rejection body, with their HTTP status, from Apple's
/// "Handling notification responses from APNs" table.
///
/// The simulator keeps its own vocabulary (it must not import the gateway's) so that the two are
/// written independently from Apple's documentation.
public enum SimulatedReason: String, Sendable, CaseIterable, Hashable {
    // 400
    case badCollapseId = "BadCollapseId"
    case badDeviceToken = "BadDeviceToken"
    case badExpirationDate = "BadExpirationDate"
    case badMessageId = "BadMessageId"
    case badPriority = "BadPriority"
    case badTopic = "BadTopic"
    case deviceTokenNotForTopic = "DeviceTokenNotForTopic"
    case duplicateHeaders = "DuplicateHeaders"
    case idleTimeout = "IdleTimeout"
    case invalidPushType = "InvalidPushType"
    case missingDeviceToken = "MissingDeviceToken"
    case missingTopic = "MissingTopic"
    case payloadEmpty = "PayloadEmpty"
    case topicDisallowed = "TopicDisallowed"
    // 403
    case badCertificate = "BadCertificate"
    case badCertificateEnvironment = "BadCertificateEnvironment"
    case expiredProviderToken = "ExpiredProviderToken"
    case forbidden = "Forbidden"
    case invalidProviderToken = "InvalidProviderToken"
    case missingProviderToken = "MissingProviderToken"
    case unrelatedKeyIdInToken = "UnrelatedKeyIdInToken"
    // 404, 405
    case badPath = "BadPath"
    case methodNotAllowed = "MethodNotAllowed"
    // 410
    case expiredToken = "ExpiredToken"
    case unregistered = "Unregistered"
    // 413
    case payloadTooLarge = "PayloadTooLarge"
    // 429
    case tooManyProviderTokenUpdates = "TooManyProviderTokenUpdates"
    case tooManyRequests = "TooManyRequests"
    // 500, 503
    case internalServerError = "InternalServerError"
    case serviceUnavailable = "ServiceUnavailable"
    case shutdown = "Shutdown"

    /// The HTTP status APNs answers with for this reason.
    public var status: Int {
        switch self {
        case .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
            .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
            .missingTopic, .payloadEmpty, .topicDisallowed:
            return 400
        case .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden, .invalidProviderToken,
            .missingProviderToken, .unrelatedKeyIdInToken:
            return 403
        case .badPath: return 404
        case .methodNotAllowed: return 405
        case .expiredToken, .unregistered: return 410
        case .payloadTooLarge: return 413
        case .tooManyProviderTokenUpdates, .tooManyRequests: return 429
        case .internalServerError: return 500
        case .serviceUnavailable, .shutdown: return 503
        }
    }
}

/// A rejection the simulator answers with: status, reason string, and for 410 the time (ms since
/// the epoch) at which the token became invalid.
public struct SimulatedRejection: Error, Sendable, Hashable, CustomStringConvertible {
    public var status: Int
    public var reason: String
    public var timestampMilliseconds: Int64?

    /// A rejection with Apple's status for `reason`.
    public init(_ reason: SimulatedReason, timestampMilliseconds: Int64? = nil) {
        self.status = reason.status
        self.reason = reason.rawValue
        self.timestampMilliseconds = timestampMilliseconds
    }

    /// Any status and reason string, for scripted handlers that imitate reasons Apple may add later.
    public init(status: Int, reason: String, timestampMilliseconds: Int64? = nil) {
        self.status = status
        self.reason = reason
        self.timestampMilliseconds = timestampMilliseconds
    }

    public var description: String {
        "\(self.status) \(self.reason)"
    }

    /// The JSON body APNs sends: `{"reason":"..."}` plus `"timestamp"` when present.
    var body: String {
        // Reason strings are ASCII identifiers chosen by the simulator or a test; escape anyway.
        let reason = self.reason.unicodeScalars.reduce(into: "") { result, scalar in
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case _ where scalar.value < 0x20: result += Self.unicodeEscape(scalar.value)
            default: result.unicodeScalars.append(scalar)
            }
        }
        if let timestamp = self.timestampMilliseconds {
            return #"{"reason":"\#(reason)","timestamp":\#(timestamp)}"#
        }
        return #"{"reason":"\#(reason)"}"#
    }
}

extension SimulatedRejection {
    fileprivate static func unicodeEscape(_ value: UInt32) -> String {
        let hex = String(value, radix: 16)
        return "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}
