import Crypto
import Foundation
import PushgateCore
import Testing
import WebPush

/// The parts of a VAPID `Authorization` value, checked from RFC 8292's text.
struct ParsedVAPID {
    var header: [String: Any]
    var claims: [String: Any]
    var signatureValid: Bool
    var k: String

    init(authorization: String) throws {
        #expect(authorization.hasPrefix("vapid t="))
        let parts = authorization.dropFirst("vapid ".count).components(separatedBy: ", ")
        let t = try #require(parts.first { $0.hasPrefix("t=") }).dropFirst(2)
        k = String(try #require(parts.first { $0.hasPrefix("k=") }).dropFirst(2))
        let pieces = t.split(separator: ".").map(String.init)
        try #require(pieces.count == 3)
        header = try #require(
            try JSONSerialization.jsonObject(with: Data(base64URLDecoded(pieces[0]))) as? [String: Any]
        )
        claims = try #require(
            try JSONSerialization.jsonObject(with: Data(base64URLDecoded(pieces[1]))) as? [String: Any]
        )
        let key = try P256.Signing.PublicKey(x963Representation: base64URLDecoded(k))
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: base64URLDecoded(pieces[2]))
        signatureValid = key.isValidSignature(signature, for: Array("\(pieces[0]).\(pieces[1])".utf8))
    }
}

@Suite("Web Push: VAPID (RFC 8292)")
struct VAPIDTests {
    let key = VAPIDKey.generate()
    let subject = try! VAPIDSubject("mailto:ops@example.com")
    let origin = try! WebPushSubscription(jsonBytes: subscriptionJSON(endpoint: "https://push.example.net:8443/p/1"))
        .origin
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test("the token: ES256 JWT with aud = origin, exp, sub; header vapid t=..., k=<public key>")
    func token() throws {
        let token = VAPIDToken(key: key, subject: subject, audience: origin, expiresAt: now.addingTimeInterval(43200.7))
        let parsed = try ParsedVAPID(authorization: token.authorization)
        #expect(parsed.header["alg"] as? String == "ES256" && parsed.header["typ"] as? String == "JWT")
        #expect(parsed.claims["aud"] as? String == "https://push.example.net:8443")
        #expect((parsed.claims["exp"] as? NSNumber)?.int64Value == 1_800_043_200)
        #expect(parsed.claims["sub"] as? String == "mailto:ops@example.com")
        #expect(parsed.signatureValid)
        #expect(parsed.k == key.publicKeyBase64URL)
        #expect(base64URLDecoded(parsed.k).count == 65)
        #expect(!"\(token)".contains(token.jwt))
    }

    @Test("keys: PKCS#8 and SEC1 PEM read; anything else refused without echoing it; description shows no secret")
    func keys() throws {
        let pem = key.pemRepresentation
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        #expect(try VAPIDKey(pemRepresentation: pem).publicKeyBase64URL == key.publicKeyBase64URL)
        let sec1 = P256.Signing.PrivateKey()
        // SEC1 (RFC 5915) DER: version 1, the scalar, the curve's OID, the public point.
        var der: [UInt8] = [0x30, 0x77, 0x02, 0x01, 0x01, 0x04, 0x20] + Array(sec1.rawRepresentation)
        der += [0xa0, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0xa1, 0x44, 0x03, 0x42, 0x00]
        der += Array(sec1.publicKey.x963Representation)
        let base64 = Array(Data(der).base64EncodedString())
        let lines = stride(from: 0, to: base64.count, by: 64).map { String(base64[$0..<min($0 + 64, base64.count)]) }
        let sec1PEM = "-----BEGIN EC PRIVATE KEY-----\n\(lines.joined(separator: "\n"))\n-----END EC PRIVATE KEY-----\n"
        let fromSEC1 = try VAPIDKey(pemRepresentation: sec1PEM)
        #expect(fromSEC1.publicKeyBase64URL == VAPIDKey(privateKey: sec1).publicKeyBase64URL)
        #expect(throws: VAPIDKeyError.notPEM) { try VAPIDKey(pemRepresentation: "hello") }
        let rsaLike = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
        #expect(throws: VAPIDKeyError.notP256PrivateKey) { try VAPIDKey(pemRepresentation: rsaLike) }
        #expect(!"\(key)".contains("PRIVATE"))
        #expect(!String(reflecting: key).contains(pem.split(separator: "\n")[1]))
    }

    @Test("subjects: mailto: and https: accepted, anything else refused naming the field")
    func subjects() throws {
        #expect(try VAPIDSubject("https://example.com/contact").value == "https://example.com/contact")
        for bad in [
            "ops@example.com", "mailto:", "mailto:nobody", "http://example.com", "https://", "mailto:a b@c.d",
            #"mailto:"x"@c.d"#,
        ] {
            #expect(throws: ValidationError(code: .invalidVAPIDSubject, field: "app.a.webpush.subject", message: "")) {
                try VAPIDSubject(bad, field: "app.a.webpush.subject")
            }
        }
    }

    @Test("the cache: one token per origin, reused, refreshed an hour before exp, never > 24 h ahead")
    func cache() throws {
        var cache = VAPIDTokenCache()
        let other = try WebPushSubscription(jsonBytes: subscriptionJSON(endpoint: "https://other.example/p")).origin
        #expect(cache.lookup(origin, now: now) == .sign(expiresAt: now.addingTimeInterval(12 * 3600)))
        let first = cache.authorization(for: origin, now: now, key: key, subject: subject)
        #expect(cache.lookup(origin, now: now.addingTimeInterval(60)) == .use(authorization: first))
        let forOther = cache.authorization(for: other, now: now, key: key, subject: subject)
        #expect(forOther != first)
        #expect(try ParsedVAPID(authorization: forOther).claims["aud"] as? String == "https://other.example")
        #expect(cache.count == 2)
        // 11 h later: still more than the margin left.
        #expect(
            cache.authorization(for: origin, now: now.addingTimeInterval(11 * 3600 - 1), key: key, subject: subject)
                == first
        )
        // Within the last hour: a new token, expiring 12 h from then.
        let later = now.addingTimeInterval(11 * 3600)
        let refreshed = cache.authorization(for: origin, now: later, key: key, subject: subject)
        #expect(refreshed != first)
        #expect(
            (try ParsedVAPID(authorization: refreshed).claims["exp"] as? NSNumber)?.int64Value
                == Int64(later.timeIntervalSince1970) + 12 * 3600
        )
        // The clock went back 13 h: the cached exp would be more than 24 h ahead, so it is re-signed.
        let back = later.addingTimeInterval(-13 * 3600)
        #expect(cache.lookup(origin, now: back) == .sign(expiresAt: back.addingTimeInterval(12 * 3600)))
        // A refusal (401/403) drops that origin's token only.
        cache.tokenRefused(for: origin)
        #expect(cache.lookup(origin, now: later) == .sign(expiresAt: later.addingTimeInterval(12 * 3600)))
        #expect(cache.lookup(other, now: now.addingTimeInterval(60)) == .use(authorization: forOther))
        cache.credentialsChanged()
        #expect(cache.count == 0)
    }

    @Test("the cache holds at most maximumOrigins, dropping expired and then the soonest to expire")
    func cacheBound() throws {
        var configuration = VAPIDTokenCache.Configuration()
        configuration.maximumOrigins = 2
        var cache = VAPIDTokenCache(configuration: try configuration.validated())
        let origins = try (1...3).map {
            try WebPushSubscription(jsonBytes: subscriptionJSON(endpoint: "https://o\($0).example/p")).origin
        }
        _ = cache.authorization(for: origins[0], now: now, key: key, subject: subject)
        _ = cache.authorization(for: origins[1], now: now.addingTimeInterval(10), key: key, subject: subject)
        _ = cache.authorization(for: origins[2], now: now.addingTimeInterval(20), key: key, subject: subject)
        #expect(cache.count == 2)
        guard case .sign = cache.lookup(origins[0], now: now.addingTimeInterval(30)) else {
            Issue.record("the soonest to expire should have been dropped")
            return
        }
        var tooLong = VAPIDTokenCache.Configuration()
        tooLong.lifetime = .seconds(25 * 3600)
        #expect(throws: VAPIDCacheConfigurationError.self) { try tooLong.validated() }
    }
}
