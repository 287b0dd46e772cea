public import Foundation
import Synchronization

/// An FCM error the simulator answers on demand, `count` times, before validating the message.
public struct FCMInjectedError: Sendable, Hashable {
    /// `UNREGISTERED`, `INVALID_ARGUMENT`, `SENDER_ID_MISMATCH`, `THIRD_PARTY_AUTH_ERROR`,
    /// `QUOTA_EXCEEDED`, `UNAVAILABLE` or `INTERNAL` (Google's table gives each its status).
    public var errorCode: String
    public var count: Int
    /// The `Retry-After` header, in seconds.
    public var retryAfterSeconds: Int?
    /// Only messages to this registration token; nil for any.
    public var token: String?

    public init(errorCode: String, count: Int = 1, retryAfterSeconds: Int? = nil, token: String? = nil) {
        self.errorCode = errorCode
        self.count = count
        self.retryAfterSeconds = retryAfterSeconds
        self.token = token
    }

    /// Google's documented status and canonical code for each FCM error code.
    static let table: [String: (status: Int, canonical: String, message: String)] = [
        "UNREGISTERED": (404, "NOT_FOUND", "Requested entity was not found."),
        "INVALID_ARGUMENT": (400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token"),
        "SENDER_ID_MISMATCH": (403, "PERMISSION_DENIED", "SenderId mismatch"),
        "THIRD_PARTY_AUTH_ERROR": (401, "UNAUTHENTICATED", "Auth error from APNS or Web Push Service"),
        "QUOTA_EXCEEDED": (429, "RESOURCE_EXHAUSTED", "Quota exceeded for the sending project."),
        "UNAVAILABLE": (503, "UNAVAILABLE", "The service is currently unavailable."),
        "INTERNAL": (500, "INTERNAL", "Internal error encountered."),
    ]
}

/// A message `messages:send` accepted.
public struct FCMAcceptedMessage: Sendable, Hashable {
    /// `projects/P/messages/ID`.
    public var name: String
    public var projectID: String
    public var token: String?
    public var topic: String?
    public var condition: String?
    /// The `message` object as received, re-encoded with sorted keys.
    public var messageJSON: String
    public var receivedAt: Date
    /// The service account whose access token authorised the send.
    public var clientEmail: String
}

/// Counters of what the simulator saw.
public struct FCMSimulatorStats: Sendable, Hashable {
    public var tokenRequests = 0
    public var accessTokensIssued = 0
    /// Access tokens issued, by the service account (`client_email`) that asked.
    public var accessTokensIssuedByAccount: [String: Int] = [:]
    public var sends = 0
    public var accepted = 0
    public var rejected = 0
    /// Distinct registration tokens among the accepted messages, and accepted messages to a token
    /// already accepted once (told apart by a 64-bit hash of the token).
    public var devices = 0
    public var duplicates = 0
    /// Token requests answered by a token-endpoint fault (an error status, a refusal, a dropped connection).
    public var tokenFaultAnswers = 0
}

/// The simulator's shared state, behind one lock; every route reads and changes it here.
final class FCMSimulatorCore: Sendable {
    struct IssuedToken: Sendable {
        var clientEmail: String
        var projectID: String
        var expiresAt: Date
    }

    struct State: Sendable {
        var accounts: [String: FCMSimulatorAccount] = [:]
        var accessTokens: [String: IssuedToken] = [:]
        var unregistered: Set<String> = []
        var injected: [FCMInjectedError] = []
        /// Every bearer token is refused (401), however fresh: as if the account's tokens were revoked.
        var refusingAccessTokens = false
        var accepted: [FCMAcceptedMessage] = []
        var nextMessageID = 1
        var stats = FCMSimulatorStats()
        /// Where the token endpoint is, once bound: assertions must name it as `aud`.
        var tokenURI = ""
        /// How long every answer of the TLS port is held (the latency fault).
        var latencyMilliseconds = 0
        /// Hashes of the tokens accepted so far (`stats.devices`, `stats.duplicates`).
        var acceptedTokens: Set<Int> = []
        /// Faults of the token endpoint, armed or in force.
        var tokenFaults: TokenEndpointFaultState?
    }

    let state: Mutex<State>
    let now: @Sendable () -> Date
    let accessTokenLifetime: Int
    let recordLimit: Int

    init(configuration: FCMSimulator.Configuration) {
        var initial = State()
        for account in configuration.accounts { initial.accounts[account.clientEmail] = account }
        initial.latencyMilliseconds = max(0, configuration.latencyMilliseconds)
        self.state = Mutex(initial)
        self.now = configuration.now
        self.accessTokenLifetime = configuration.accessTokenLifetimeSeconds
        self.recordLimit = configuration.recordLimit
    }

    /// The HTTP/2 (and HTTP/1.1) routes: the token endpoint and `messages:send`.
    func route(_ request: FCMSimulatorRequest) -> FCMSimulatorResponse {
        guard request.method == "POST" else {
            return .fcmError(405, canonical: "INVALID_ARGUMENT", message: "Only POST is supported.")
        }
        if request.path == "/token" { return token(request) }
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: false)
        // "", "v1", "projects", P, "messages:send"
        if parts.count == 5, parts[1] == "v1", parts[2] == "projects", !parts[3].isEmpty, parts[4] == "messages:send" {
            return send(request, projectID: String(parts[3]))
        }
        return .fcmError(404, canonical: "NOT_FOUND", message: "The requested URL was not found on this server.")
    }

    func issueAccessToken(for account: FCMSimulatorAccount) -> String {
        var generator = SystemRandomNumberGenerator()
        let value = "ya29.sim-" + (0..<4).map { _ in String(format: "%016llx", generator.next() as UInt64) }.joined()
        let expiresAt = now().addingTimeInterval(TimeInterval(accessTokenLifetime))
        state.withLock { state in
            state.accessTokens[value] = IssuedToken(
                clientEmail: account.clientEmail,
                projectID: account.projectID,
                expiresAt: expiresAt
            )
            state.stats.accessTokensIssued += 1
            state.stats.accessTokensIssuedByAccount[account.clientEmail, default: 0] += 1
        }
        return value
    }

    func record(_ message: FCMAcceptedMessage) {
        state.withLock { state in
            state.accepted.append(message)
            if state.accepted.count > recordLimit { state.accepted.removeFirst(state.accepted.count - recordLimit) }
            state.stats.accepted += 1
            if let target = state.tokenFaults?.startAtAccepted, state.stats.accepted >= target {
                Self.startTokenFaults(&state, now: message.receivedAt)
            }
            if let token = message.token {
                if state.acceptedTokens.insert(token.hashValue).inserted {
                    state.stats.devices += 1
                } else {
                    state.stats.duplicates += 1
                }
            }
        }
    }

    func reset() {
        state.withLock { state in
            state.tokenFaults = nil
            state.accessTokens = [:]
            state.unregistered = []
            state.injected = []
            state.refusingAccessTokens = false
            state.accepted = []
            state.acceptedTokens = []
            state.stats = FCMSimulatorStats()
        }
    }

    var latencyMilliseconds: Int { state.withLock { $0.latencyMilliseconds } }

    /// Every access token issued so far is revoked: sends with one answer 401 (fresh ones work).
    func revokeAccessTokens() {
        state.withLock { $0.accessTokens = [:] }
    }

    /// Replaces the token-endpoint faults: in force now, or armed until `afterAccepted` more messages.
    func setTokenFaults(_ faults: FCMTokenEndpointFaults) {
        let now = self.now()
        state.withLock { state in
            var fault = TokenEndpointFaultState(faults: faults)
            if let after = faults.afterAccepted, after > 0 { fault.startAtAccepted = state.stats.accepted + after }
            state.tokenFaults = fault
            if fault.startAtAccepted == nil { Self.startTokenFaults(&state, now: now) }
        }
    }

    func clearTokenFaults() {
        state.withLock { $0.tokenFaults = nil }
    }

    /// The token-endpoint faults set, and whether they are in force now.
    func tokenFaults() -> (faults: FCMTokenEndpointFaults, inForce: Bool)? {
        let now = self.now()
        return state.withLock { state in
            state.tokenFaults.map { ($0.faults, $0.inForce(now: now) != nil) }
        }
    }

    static func startTokenFaults(_ state: inout State, now: Date) {
        guard var fault = state.tokenFaults, fault.startedAt == nil else { return }
        fault.startAtAccepted = nil
        fault.startedAt = now
        state.tokenFaults = fault
        if fault.faults.revokeAccessTokens { state.accessTokens = [:] }
    }

    func expireAccessTokens() {
        let past = now().addingTimeInterval(-1)
        state.withLock { state in
            for key in state.accessTokens.keys { state.accessTokens[key]?.expiresAt = past }
        }
    }
}
