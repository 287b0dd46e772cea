import Crypto
import Foundation
import PushgateCore
import Testing
import _CryptoExtras

@Suite("FCM assertion signer")
struct FCMAssertionSignerTests {
    @Test(
        "the header is RS256 with the key id, the claims are Google's, iat a minute back for skew, exp an hour after it"
    )
    func headerAndClaims() throws {
        let signer = FCMAssertionSigner(account: try FCMTestAccount.account())
        let jwt = try signer.assertion(issuedAt: Date(timeIntervalSince1970: 1_800_000_000.9))
        let parts = jwt.split(separator: ".")
        try #require(parts.count == 3)
        let header = try #require(jsonObject(base64URLDecode(parts[0])))
        #expect(header["alg"] as? String == "RS256")
        #expect(header["typ"] as? String == "JWT")
        #expect(header["kid"] as? String == "0123abcd")
        let claims = try #require(jsonObject(base64URLDecode(parts[1])))
        #expect(claims["iss"] as? String == "pushgate@pushgate-test.iam.gserviceaccount.com")
        #expect(claims["scope"] as? String == "https://www.googleapis.com/auth/firebase.messaging")
        #expect(claims["aud"] as? String == FCMTestAccount.tokenURI)
        #expect((claims["iat"] as? NSNumber)?.int64Value == 1_799_999_940)
        #expect((claims["exp"] as? NSNumber)?.int64Value == 1_800_003_540)
        #expect(claims.count == 5)
    }

    @Test("the signature is RSASSA-PKCS1-v1_5 SHA-256 over header.claims, checked with the public key")
    func signatureVerifies() throws {
        let account = try FCMTestAccount.account()
        let jwt = try FCMAssertionSigner(account: account).assertion(
            issuedAt: Date(timeIntervalSince1970: 1_800_000_000)
        )
        let dot = try #require(jwt.lastIndex(of: "."))
        let signature = _RSA.Signing.RSASignature(
            rawRepresentation: try #require(base64URLDecode(jwt[jwt.index(after: dot)...]))
        )
        let input = Array(jwt[..<dot].utf8)
        #expect(
            account.publicKey.isValidSignature(signature, for: SHA256.hash(data: input), padding: .insecurePKCS1v1_5)
        )
        var tampered = input
        tampered[tampered.count - 1] ^= 1
        #expect(
            !account.publicKey.isValidSignature(
                signature,
                for: SHA256.hash(data: tampered),
                padding: .insecurePKCS1v1_5
            )
        )
    }

    @Test("a lifetime over an hour is cut to an hour")
    func lifetimeClamped() throws {
        let signer = FCMAssertionSigner(account: try FCMTestAccount.account(), lifetime: .seconds(7200))
        #expect(signer.lifetime == .seconds(3600))
        let short = FCMAssertionSigner(account: try FCMTestAccount.account(), lifetime: .seconds(600))
        let claims = try #require(
            jsonObject(
                base64URLDecode(
                    try short.assertion(issuedAt: Date(timeIntervalSince1970: 100)).split(separator: ".")[1]
                )
            )
        )
        #expect((claims["exp"] as? NSNumber)?.int64Value == 640)
    }

    @Test("the token request is form-encoded with the JWT-bearer grant type")
    func tokenRequestBody() {
        let body = String(decoding: FCMAssertionSigner.tokenRequestBody(assertion: "a.b.c"), as: UTF8.self)
        #expect(body == "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=a.b.c")
    }
}
