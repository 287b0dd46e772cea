import Foundation

/// Faults of the simulator's token endpoint (`POST /token`), for tests of how a client lives through an
/// outage of Google's OAuth endpoint: while in force, every token request is answered by the fault instead
/// of a grant. They start at once, or once `afterAccepted` more messages have been accepted (so that a test
/// can cut the endpoint in the middle of a broadcast), and last `duration`, or until cleared.
public struct FCMTokenEndpointFaults: Sendable, Hashable {
    /// Answer this HTTP status (a 5xx or 429: an outage; 400 or 401 with `oauthError`: a refusal).
    public var status: Int?
    /// The OAuth `error` of the answer's body (RFC 6749 §5.2): `invalid_grant` is a revoked or unknown
    /// key. With no `status`, the status is 400.
    public var oauthError: String?
    /// Hold each token answer this long (a slow endpoint).
    public var latencyMilliseconds = 0
    /// Close the connection of each token request without answering it.
    public var dropConnections = false
    /// When the faults start, revoke every access token issued so far (sends with one answer 401).
    public var revokeAccessTokens = false
    /// How long the faults last once started; nil: until cleared.
    public var duration: Duration?
    /// Start once this many more messages have been accepted; nil: at once.
    public var afterAccepted: Int?

    public init(
        status: Int? = nil,
        oauthError: String? = nil,
        latencyMilliseconds: Int = 0,
        dropConnections: Bool = false,
        revokeAccessTokens: Bool = false,
        duration: Duration? = nil,
        afterAccepted: Int? = nil
    ) {
        self.status = status
        self.oauthError = oauthError
        self.latencyMilliseconds = latencyMilliseconds
        self.dropConnections = dropConnections
        self.revokeAccessTokens = revokeAccessTokens
        self.duration = duration
        self.afterAccepted = afterAccepted
    }

    /// The keys of `POST /token-faults`.
    static let keys: Set<String> = [
        "status", "error", "latency_ms", "drop", "revoke_access_tokens", "seconds", "after_accepted",
    ]

    /// The body of `POST /token-faults`, typed strictly (a number is not a flag, a flag not a number).
    private struct Body: Decodable {
        var status: Int?
        var error: String?
        var latency_ms: Int?
        var drop: Bool?
        var revoke_access_tokens: Bool?
        var seconds: Double?
        var after_accepted: Int?
    }

    /// Reads a `POST /token-faults` body; the error names the key and what it must be.
    init(jsonBytes: [UInt8]) throws(FaultError) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(jsonBytes)) as? [String: Any] else {
            throw FaultError(text: "expected a JSON object")
        }
        if let unknown = object.keys.sorted().first(where: { !Self.keys.contains($0) }) {
            throw FaultError(
                text: "unknown key \(unknown); token-endpoint faults: \(Self.keys.sorted().joined(separator: ", "))"
            )
        }
        let body: Body
        do {
            body = try JSONDecoder().decode(Body.self, from: Data(jsonBytes))
        } catch {
            throw FaultError(
                text:
                    "status, latency_ms and after_accepted must be integers, seconds a number, error a string, drop and revoke_access_tokens true or false"
            )
        }
        if let status = body.status, !(400...599).contains(status) {
            throw FaultError(text: "status must be in 400...599")
        }
        if let error = body.error, error.isEmpty || error.count > 64 {
            throw FaultError(text: "error must be an OAuth error code such as invalid_grant")
        }
        if let latency = body.latency_ms, !(0...600_000).contains(latency) {
            throw FaultError(text: "latency_ms must be in 0...600000")
        }
        if let seconds = body.seconds, !(seconds > 0 && seconds <= 86_400) {
            throw FaultError(text: "seconds must be in (0, 86400]")
        }
        if let after = body.after_accepted, after < 0 { throw FaultError(text: "after_accepted must be >= 0") }
        self.init(
            status: body.status,
            oauthError: body.error,
            latencyMilliseconds: body.latency_ms ?? 0,
            dropConnections: body.drop ?? false,
            revokeAccessTokens: body.revoke_access_tokens ?? false,
            duration: body.seconds.map { .milliseconds(Int64(($0 * 1000).rounded())) },
            afterAccepted: body.after_accepted
        )
    }

    struct FaultError: Error {
        var text: String
    }

    /// The answer to a token request while the faults are in force; nil when they only delay it.
    var answer: FCMSimulatorResponse? {
        if dropConnections { return .dropped }
        if let oauthError {
            return .oauthError(
                oauthError,
                "The token endpoint refuses this request (simulated).",
                status: status ?? 400
            )
        }
        if let status {
            return .json(
                status,
                ["error": "unavailable", "error_description": "The service is unavailable (simulated)."]
            )
        }
        return nil
    }

    var json: [String: Any] {
        var object: [String: Any] = [
            "latency_ms": latencyMilliseconds, "drop": dropConnections, "revoke_access_tokens": revokeAccessTokens,
        ]
        object["status"] = status
        object["error"] = oauthError
        object["seconds"] = duration.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
        object["after_accepted"] = afterAccepted
        return object
    }
}

/// Token-endpoint faults as the simulator keeps them: armed (waiting for an accepted count), started, ended.
struct TokenEndpointFaultState: Sendable {
    var faults: FCMTokenEndpointFaults
    /// Start when `stats.accepted` reaches this (nil: started, or starting at once).
    var startAtAccepted: Int?
    var startedAt: Date?

    /// The faults in force at `now`, if any.
    func inForce(now: Date) -> FCMTokenEndpointFaults? {
        guard let startedAt else { return nil }
        if let duration = faults.duration,
            now
                >= startedAt.addingTimeInterval(
                    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
                )
        {
            return nil
        }
        return faults
    }
}
