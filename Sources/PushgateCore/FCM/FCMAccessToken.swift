public import Foundation

/// An OAuth 2.0 access token for FCM and the moment it stops being valid.
///
/// A bearer credential: `description` and the reflection mirror show only the expiry.
public struct FCMAccessToken: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    public let value: String
    public let expiresAt: Date
    /// When it was received; nil when unknown.
    public let issuedAt: Date?

    public init(value: String, expiresAt: Date, issuedAt: Date? = nil) {
        self.value = value
        self.expiresAt = expiresAt
        self.issuedAt = issuedAt
    }

    /// Whether a successor should be fetched at `now`: `margin` before expiry, or half-way through the
    /// token's life if that is later. A token shorter-lived than twice the margin (a stand-in's minute-long
    /// tokens) would otherwise be due from the moment it arrives, and every batch would fetch again.
    public func isRefreshDue(now: Date, margin: Duration) -> Bool {
        var lead = TimeInterval(margin.components.seconds)
        if let issuedAt { lead = min(lead, expiresAt.timeIntervalSince(issuedAt) / 2) }
        return expiresAt.timeIntervalSince(now) <= lead
    }

    /// The value of the `authorization` request header.
    public var authorizationHeaderValue: String { "Bearer " + value }

    public var description: String { "FCMAccessToken(expires: \(Int64(expiresAt.timeIntervalSince1970)))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["expiresAt": expiresAt], displayStyle: .struct) }
}

/// What a token endpoint granted: `{"access_token": ..., "expires_in": 3599, "token_type": "Bearer"}`.
public struct FCMTokenGrant: Hashable, Sendable {
    public let accessToken: String
    public let expiresIn: Duration

    public init(accessToken: String, expiresIn: Duration) {
        self.accessToken = accessToken
        self.expiresIn = expiresIn
    }

    /// Parses a 200 answer of the token endpoint.
    public init(jsonBytes: [UInt8]) throws(FCMCredentialError) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(jsonBytes)) as? [String: Any],
            let token = object["access_token"] as? String, !token.isEmpty,
            let seconds = (object["expires_in"] as? NSNumber)?.int64Value, seconds > 0
        else {
            throw .malformedGrant
        }
        if let type = object["token_type"] as? String, type.lowercased() != "bearer" { throw .malformedGrant }
        self.init(accessToken: token, expiresIn: .seconds(seconds))
    }

    /// The token, expiring `expiresIn` after `receivedAt`.
    public func token(receivedAt: Date) -> FCMAccessToken {
        FCMAccessToken(
            value: accessToken,
            expiresAt: receivedAt.addingTimeInterval(TimeInterval(expiresIn.components.seconds)),
            issuedAt: receivedAt
        )
    }
}

/// Trades a signed assertion for an access token: an HTTP POST to the account's `token_uri` (see
/// ``FCMAssertionSigner/tokenRequestBody(assertion:)``). Implemented by the FCM transport; tests
/// script it.
public protocol FCMTokenExchanging: Sendable {
    func exchange(assertion: String, tokenURI: URL) async throws(FCMCredentialError) -> FCMTokenGrant
}
