public import Foundation

/// What became of one message sent to one FCM registration token: FCM's answer, or why there was
/// none, in the outcome classes the dispatcher already understands for APNs.
public struct FCMOutcome: Hashable, Sendable, CustomStringConvertible {
    public var outcomeClass: OutcomeClass
    /// The HTTP status; nil when there was no answer.
    public var status: Int?
    /// `error.details[].errorCode`, when FCM named one.
    public var errorCode: FCMErrorCode?
    /// `name` of an accepted message (`projects/P/messages/ID`).
    public var messageName: String?
    /// The device's token is dead: invalidate the device (UNREGISTERED, or INVALID_ARGUMENT about the
    /// registration token).
    public var invalidatesDevice: Bool
    /// A configuration problem (THIRD_PARTY_AUTH_ERROR, an access token refused twice, credentials the token
    /// endpoint refuses): alarm, never prune. Rejected (THIRD_PARTY_AUTH_ERROR) it fails the device;
    /// retryable (the credentials) the device waits.
    public var isConfigurationAlarm: Bool
    /// 401 without an FCM error code: the access token was refused. Refresh it once and resend once.
    public var accessTokenRejected: Bool
    /// The token endpoint refused the service account's credentials (`invalid_grant`...): nothing was
    /// sent. A configuration alarm; the device waits (no earlier than ``retryAfter``, the next token fetch)
    /// within its request's expiration.
    public var credentialsRefused: Bool
    /// `Retry-After`, when the answer carried one (or, with ``credentialsRefused``, the next token fetch).
    public var retryAfter: Duration?
    /// Set when there was no answer.
    public var transportFailure: PushTransportFailure?

    public init(
        outcomeClass: OutcomeClass,
        status: Int? = nil,
        errorCode: FCMErrorCode? = nil,
        messageName: String? = nil,
        invalidatesDevice: Bool = false,
        isConfigurationAlarm: Bool = false,
        accessTokenRejected: Bool = false,
        retryAfter: Duration? = nil,
        credentialsRefused: Bool = false,
        transportFailure: PushTransportFailure? = nil
    ) {
        self.outcomeClass = outcomeClass
        self.status = status
        self.errorCode = errorCode
        self.messageName = messageName
        self.invalidatesDevice = invalidatesDevice
        self.isConfigurationAlarm = isConfigurationAlarm
        self.accessTokenRejected = accessTokenRejected
        self.retryAfter = retryAfter
        self.credentialsRefused = credentialsRefused
        self.transportFailure = transportFailure
    }

    /// No answer: classed as for APNs (GOAWAY and connect failures retire the connection). An access
    /// token refused on every resend (``PushTransportFailure/credentialRefused``) is FCM's own credential
    /// outcome, as when FCM refuses a second token (`UNAUTHENTICATED`, a configuration alarm: the device
    /// waits, it is never pruned), not a transport failure.
    public static func failed(_ failure: PushTransportFailure) -> FCMOutcome {
        guard failure != .credentialRefused else {
            return FCMOutcome(outcomeClass: .retryable, isConfigurationAlarm: true, accessTokenRejected: true)
        }
        return FCMOutcome(
            outcomeClass: failure.isConnectionFatal ? .connectionFatal : .retryable,
            transportFailure: failure
        )
    }

    /// Classifies an answer from `messages:send`: its status, body and `Retry-After` header (seconds
    /// or an HTTP date, read against `now`).
    public static func answered(status: Int, body: [UInt8], retryAfter: String? = nil, now: Date) -> FCMOutcome {
        let parsed = FCMErrorBody(jsonBytes: body)
        let delay = retryAfter.flatMap { RetryAfterHeader.parse($0, now: now) }
        if status == 200 {
            return FCMOutcome(outcomeClass: .accepted, status: status, messageName: parsed.name)
        }
        var outcome = FCMOutcome(
            outcomeClass: .rejected,
            status: status,
            errorCode: parsed.errorCode,
            retryAfter: delay
        )
        switch parsed.errorCode {
        case .unregistered:
            outcome.invalidatesDevice = true
        case .invalidArgument:
            outcome.invalidatesDevice = isAboutRegistrationToken(parsed.message)
        case .senderIDMismatch:
            break
        case .thirdPartyAuthError:
            outcome.isConfigurationAlarm = true
        case .quotaExceeded, .unavailable, .internal:
            outcome.outcomeClass = .retryable
        case .unspecifiedError, .unknown, nil:
            if status == 401 {
                // The access token was refused (expired, revoked): not the message's fault.
                outcome.outcomeClass = .retryable
                outcome.accessTokenRejected = true
                outcome.isConfigurationAlarm = true
            } else if status == 429 || status >= 500 {
                outcome.outcomeClass = .retryable
            }
        }
        return outcome
    }

    public var isAccepted: Bool { outcomeClass == .accepted }

    /// The reason recorded when the token endpoint refused the credentials.
    public static let credentialsRefusedLabel = "fcm_credentials_refused"

    /// A bounded label for metrics and reports.
    public var reasonLabel: String {
        if let errorCode { return errorCode.rawValue }
        if credentialsRefused { return Self.credentialsRefusedLabel }
        if let transportFailure { return transportFailure.label }
        if accessTokenRejected { return "UNAUTHENTICATED" }
        if let status { return status == 200 ? "" : "status_\(status)" }
        return "unknown"
    }

    public var description: String {
        var parts = [outcomeClass.rawValue]
        if let status { parts.append("status=\(status)") }
        if let errorCode { parts.append("error=\(errorCode)") }
        if invalidatesDevice { parts.append("invalidates") }
        if isConfigurationAlarm { parts.append("alarm") }
        if credentialsRefused { parts.append("credentials-refused") }
        if let retryAfter { parts.append("retry-after=\(retryAfter)") }
        if let transportFailure { parts.append("failure=\(transportFailure)") }
        return parts.joined(separator: " ")
    }

    /// Google's wording: "The registration token is not a valid FCM registration token".
    static func isAboutRegistrationToken(_ message: String?) -> Bool {
        guard let message = message?.lowercased(), message.contains("registration token") else { return false }
        return message.contains("not a valid") || message.contains("invalid")
    }
}

/// The parts of an FCM answer body that matter: `name` on success; on error `error.message` and the
/// `errorCode` of the `FcmError` detail.
struct FCMErrorBody {
    var name: String?
    var message: String?
    var errorCode: FCMErrorCode?

    init(jsonBytes: [UInt8]) {
        guard !jsonBytes.isEmpty,
            let object = try? JSONSerialization.jsonObject(with: Data(jsonBytes)) as? [String: Any]
        else { return }
        name = object["name"] as? String
        guard let error = object["error"] as? [String: Any] else { return }
        message = error["message"] as? String
        let details = error["details"] as? [[String: Any]] ?? []
        let code = details.lazy.compactMap { $0["errorCode"] as? String }.first
        errorCode = code.map(FCMErrorCode.init(rawValue:))
    }
}
