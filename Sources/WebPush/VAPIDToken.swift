import Crypto
public import Foundation
public import PushgateCore

/// A signed VAPID token (RFC 8292 §2): an ES256 JWT
/// `{"typ":"JWT","alg":"ES256"}.{"aud":"<origin>","exp":<s>,"sub":"<subject>"}`, valid for the push
/// service of one origin until `exp`, with the header that carries it.
public struct VAPIDToken: Hashable, Sendable {
    /// RFC 8292 §2: a push service may refuse an `exp` more than 24 hours ahead.
    public static let maximumLifetimeSeconds: Int64 = 24 * 3600

    public let jwt: String
    public let audience: WebPushOrigin
    public let expiresAt: Date
    /// `Authorization: vapid t=<jwt>, k=<public key>`.
    public let authorization: String

    /// Signs a token for `audience` expiring at `expiresAt` (whole seconds, rounded down).
    public init(key: VAPIDKey, subject: VAPIDSubject, audience: WebPushOrigin, expiresAt: Date) {
        let exp = Int64(expiresAt.timeIntervalSince1970.rounded(.down))
        // The origin and subject were validated to need no JSON escaping.
        let claims = #"{"aud":"\#(audience.serialized)","exp":\#(exp),"sub":"\#(subject.value)"}"#
        let signingInput = Self.encodedHeader + "." + Base64URL.encode(Array(claims.utf8))
        let signature: P256.Signing.ECDSASignature
        do {
            signature = try key.privateKey.signature(for: Array(signingInput.utf8))
        } catch {
            // Signing with a valid P-256 key does not fail.
            preconditionFailure("ES256 signing failed: \(error)")
        }
        jwt = signingInput + "." + Base64URL.encode(signature.rawRepresentation)
        self.audience = audience
        self.expiresAt = Date(timeIntervalSince1970: TimeInterval(exp))
        authorization = "vapid t=\(jwt), k=\(key.publicKeyBase64URL)"
    }

    private static let encodedHeader = Base64URL.encode(Array(#"{"typ":"JWT","alg":"ES256"}"#.utf8))
}

extension VAPIDToken: CustomStringConvertible {
    /// Never the JWT itself: it is a credential for its origin until it expires.
    public var description: String {
        "VAPIDToken(aud: \(audience), exp: \(Int64(expiresAt.timeIntervalSince1970)))"
    }
}
