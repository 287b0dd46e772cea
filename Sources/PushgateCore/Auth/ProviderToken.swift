public import Foundation

/// A signed APNs provider token (an ES256 JWT) and the moment it claims to have been issued.
///
/// The JWT is a bearer credential: anyone holding it can push to the team's apps for up to an hour.
/// So `description`, `debugDescription` and the reflection mirror show only `iat`; read `jwt` (or
/// `authorizationHeaderValue`) only where the `authorization` header is written.
public struct ProviderToken: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// `header.claims.signature`, base64url without padding.
    public let jwt: String
    /// The `iat` claim: whole seconds since 1970.
    public let issuedAt: Date

    public init(jwt: String, issuedAt: Date) {
        self.jwt = jwt
        self.issuedAt = issuedAt
    }

    /// The value of the `authorization` request header.
    public var authorizationHeaderValue: String { "bearer " + jwt }

    /// The `iat` claim as an integer.
    public var issuedAtSeconds: Int64 { Int64(issuedAt.timeIntervalSince1970.rounded(.down)) }

    /// How old the token is at `now`. Negative if our clock went backwards since it was issued.
    public func age(at now: Date) -> Duration {
        .nanoseconds(Int64((now.timeIntervalSince(issuedAt) * 1e9).rounded(.down)))
    }

    public var description: String { "ProviderToken(iat: \(issuedAtSeconds))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["issuedAt": issuedAt], displayStyle: .struct) }
}
