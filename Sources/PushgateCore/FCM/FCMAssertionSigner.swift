import Crypto
public import Foundation
import _CryptoExtras

/// Signs the JWT a service account trades for an FCM access token (Google's "JWT bearer" grant).
///
/// The header is `{"alg":"RS256","typ":"JWT","kid":"<private_key_id>"}`; the claims are `iss` (the
/// account's email), `scope` (FCM's), `aud` (the account's `token_uri`), `iat` and `exp`, whole
/// seconds, with `exp` at most one hour after `iat` (Google refuses more). RSASSA-PKCS1-v1_5 with
/// SHA-256, base64url without padding.
///
/// `iat` is backdated by ``clockSkewAllowance``: Google refuses an assertion "issued" in its future, and a
/// host clock a few seconds ahead would otherwise make every token fetch fail. `exp` stays `lifetime` after
/// that `iat`, so within Google's hour.
public struct FCMAssertionSigner: Sendable, CustomStringConvertible {
    /// The OAuth scope that allows `messages:send`.
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// Google: `exp` at most one hour after `iat`.
    public static let maximumLifetime: Duration = .seconds(3600)
    /// How far `iat` lies before the time of signing.
    public static let clockSkewAllowance: Duration = .seconds(60)
    /// The `grant_type` of the token request.
    public static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"

    public let account: FCMServiceAccount
    /// `exp - iat`, never more than ``maximumLifetime``.
    public let lifetime: Duration

    public init(account: FCMServiceAccount, lifetime: Duration = Self.maximumLifetime) {
        self.account = account
        self.lifetime = min(max(lifetime, .seconds(1)), Self.maximumLifetime)
    }

    /// The signed assertion, signed at `issuedAt`: its `iat` is that time rounded down to whole seconds,
    /// less ``clockSkewAllowance``.
    public func assertion(issuedAt: Date) throws(FCMCredentialError) -> String {
        let iat = Int64(issuedAt.timeIntervalSince1970.rounded(.down)) - Self.clockSkewAllowance.components.seconds
        let exp = iat + lifetime.components.seconds
        let header =
            #"{"alg":"RS256","typ":"JWT","kid":"# + Payload.jsonStringLiteral(account.privateKeyID) + "}"
        var claims = #"{"iss":"# + Payload.jsonStringLiteral(account.clientEmail)
        claims += #","scope":"# + Payload.jsonStringLiteral(Self.scope)
        claims += #","aud":"# + Payload.jsonStringLiteral(account.tokenURI.absoluteString)
        claims += #","iat":\#(iat),"exp":\#(exp)}"#
        let signingInput =
            ProviderTokenSigner.base64URL(Array(header.utf8)) + "." + ProviderTokenSigner.base64URL(Array(claims.utf8))
        let signature: _RSA.Signing.RSASignature
        do {
            signature = try account.privateKey.signature(
                for: SHA256.hash(data: Array(signingInput.utf8)),
                padding: .insecurePKCS1v1_5
            )
        } catch {
            throw .signingFailed(detail: String(describing: type(of: error)))
        }
        return signingInput + "." + ProviderTokenSigner.base64URL(Array(signature.rawRepresentation))
    }

    /// The form-encoded body of the token request carrying `assertion`. The assertion is base64url
    /// and dots, so it needs no percent-encoding.
    public static func tokenRequestBody(assertion: String) -> [UInt8] {
        Array("grant_type=\(grantType.replacingOccurrences(of: ":", with: "%3A"))&assertion=\(assertion)".utf8)
    }

    public var description: String { "FCMAssertionSigner(\(account))" }
}
