import Foundation

/// One connection's view of provider tokens, per Apple's rules:
/// - "APNs rejects any request whose token contains a timestamp that's more than one hour old"
///   (403 `ExpiredProviderToken`);
/// - "APNs report an error if you use a new token more than once every 20 minutes on the same
///   connection" (429 `TooManyProviderTokenUpdates`);
/// - a missing or unverifiable token is 403 `MissingProviderToken` / `InvalidProviderToken`.
///
/// A pure state machine: the caller passes the time read from its injected clock.
struct ProviderTokenTracker: Sendable {
    static let maximumTokenAge: TimeInterval = 60 * 60
    static let minimumUpdateInterval: TimeInterval = 20 * 60

    enum Decision: Equatable {
        case authorized(teamID: String)
        case rejected(SimulatedReason)
    }

    private struct Adopted {
        var token: String
        var claims: ProviderTokenVerifier.Claims
        var adoptedAt: Date
    }

    private var current: Adopted?

    init() {}

    /// Decides one request given its `authorization` header value (nil when absent).
    mutating func requestReceived(
        authorization: String?,
        now: Date,
        verifier: ProviderTokenVerifier
    ) -> Decision {
        guard let authorization, let token = Self.bearerToken(authorization) else {
            return authorization == nil ? .rejected(.missingProviderToken) : .rejected(.invalidProviderToken)
        }
        if let current = self.current, current.token == token {
            // The same token as before: already verified; only its age can change.
            return Self.isExpired(current.claims, now: now)
                ? .rejected(.expiredProviderToken) : .authorized(teamID: current.claims.teamID)
        }
        let claims: ProviderTokenVerifier.Claims
        switch verifier.verify(token[...]) {
        case .success(let verified): claims = verified
        case .failure: return .rejected(.invalidProviderToken)
        }
        if Self.isExpired(claims, now: now) {
            return .rejected(.expiredProviderToken)
        }
        if let current = self.current, now.timeIntervalSince(current.adoptedAt) < Self.minimumUpdateInterval {
            return .rejected(.tooManyProviderTokenUpdates)
        }
        self.current = Adopted(token: token, claims: claims, adoptedAt: now)
        return .authorized(teamID: claims.teamID)
    }

    private static func isExpired(_ claims: ProviderTokenVerifier.Claims, now: Date) -> Bool {
        now.timeIntervalSince1970 - TimeInterval(claims.issuedAt) > Self.maximumTokenAge
    }

    /// `bearer <token>` (scheme case-insensitive) → the token, or nil.
    private static func bearerToken(_ value: String) -> String? {
        let prefix = "bearer "
        guard value.count > prefix.count, value.prefix(prefix.count).lowercased() == prefix else { return nil }
        let token = value.dropFirst(prefix.count).trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }
}
