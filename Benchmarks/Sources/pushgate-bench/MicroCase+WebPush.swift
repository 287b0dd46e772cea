import Crypto
import Foundation
import PushgateCore
import WebPush

/// Web Push's per-message cost: each message to each browser is encrypted alone (RFC 8291: a fresh ECDH
/// key pair, an ECDH, HKDF, AES-128-GCM), unlike APNs and FCM where one payload serves every device.
extension MicroCase {
    static var webPush: [MicroCase] {
        [
            MicroCase(
                name: "webpush-encrypt",
                operation:
                    "one Web Push message encrypted for one subscription (WebPushEncryption.encrypt: P-256 key"
                    + " pair, ECDH, HKDF, AES-128-GCM on the 133-byte payload)",
                prepare: { try webPushEncryptionWorkload() }
            ),
            MicroCase(
                name: "webpush-keygen",
                operation:
                    "the message's fresh P-256 key pair and its public key's x9.63 form (what encrypt does before"
                    + " the ECDH)",
                prepare: { webPushKeyGenerationWorkload() }
            ),
            MicroCase(
                name: "webpush-fipskey",
                operation:
                    "P256.KeyAgreement.PrivateKey() and its public key's x9.63 form: swift-crypto's generator, with"
                    + " its FIPS self-test (not used: for comparison)",
                prepare: { webPushFIPSKeyGenerationWorkload() }
            ),
            MicroCase(
                name: "webpush-ecdh",
                operation: "one P-256 ECDH (sharedSecretFromKeyAgreement) with the browser's key, the key pair given",
                prepare: { try webPushECDHWorkload() }
            ),
            MicroCase(
                name: "webpush-readback",
                operation:
                    "a stored subscription read back from its device token (WebPushSubscription(deviceToken:)),"
                    + " as each message's send does",
                prepare: { try webPushSubscriptionWorkload() }
            ),
            MicroCase(
                name: "webpush-vapid",
                operation: "one VAPID token signed (VAPIDToken: ES256 JWT and header; once per origin every 11 h)",
                prepare: { try vapidWorkload() }
            ),
        ]
    }

    /// A browser's subscription (RFC 8291 section 5's user agent keys).
    static func makeWebPushSubscription() throws -> WebPushSubscription {
        let json =
            #"{"endpoint":"https://push.example.net/wpush/v2/bench","keys":{"p256dh":"BCVxsr7N_eNgVRqvHtD0zTZsEc6-"#
            + #"VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4","auth":"BTBZMqHH6r4Tts7J_aSIgg"}}"#
        return try WebPushSubscription(jsonBytes: Array(json.utf8))
    }

    private static func webPushEncryptionWorkload() throws -> MicroWorkload {
        let subscription = try makeWebPushSubscription()
        let plaintext = Array(MicroFixtures.payloadJSON.utf8)
        let body = try WebPushEncryption.encrypt(plaintext, for: subscription)
        try MicroCheckFailure.require(
            body.count == plaintext.count + WebPushEncryption.headerByteCount + 1 + WebPushEncryption.tagByteCount,
            "the encrypted body is \(body.count) bytes for \(plaintext.count) of plaintext"
        )
        let other = try WebPushEncryption.encrypt(plaintext, for: subscription)
        try MicroCheckFailure.require(
            body[0..<WebPushEncryption.headerByteCount] != other[0..<WebPushEncryption.headerByteCount],
            "two messages share a salt and key"
        )
        return MicroWorkload {
            for _ in 0..<10 { _ = try WebPushEncryption.encrypt(plaintext, for: subscription) }
            return 10
        }
    }

    private static func webPushKeyGenerationWorkload() -> MicroWorkload {
        var generator = SystemRandomNumberGenerator()
        return MicroWorkload {
            for _ in 0..<10 {
                _ = WebPushEncryption.freshServerKey(using: &generator).publicKey.x963Representation
            }
            return 10
        }
    }

    private static func webPushFIPSKeyGenerationWorkload() -> MicroWorkload {
        MicroWorkload {
            for _ in 0..<10 { _ = P256.KeyAgreement.PrivateKey().publicKey.x963Representation }
            return 10
        }
    }

    private static func webPushECDHWorkload() throws -> MicroWorkload {
        let subscription = try makeWebPushSubscription()
        let serverKey = P256.KeyAgreement.PrivateKey()
        let secret = try serverKey.sharedSecretFromKeyAgreement(with: subscription.userAgentPublicKey)
        try MicroCheckFailure.require(secret.withUnsafeBytes { $0.count } == 32, "the ECDH secret is not 32 bytes")
        return MicroWorkload {
            for _ in 0..<10 { _ = try serverKey.sharedSecretFromKeyAgreement(with: subscription.userAgentPublicKey) }
            return 10
        }
    }

    private static func webPushSubscriptionWorkload() throws -> MicroWorkload {
        let subscription = try makeWebPushSubscription()
        let token = subscription.deviceToken
        try MicroCheckFailure.require(
            try WebPushSubscription(deviceToken: token) == subscription,
            "the token does not read back as its subscription"
        )
        return MicroWorkload {
            for _ in 0..<10 { _ = try WebPushSubscription(deviceToken: token) }
            return 10
        }
    }

    private static func vapidWorkload() throws -> MicroWorkload {
        let key = VAPIDKey.generate()
        let subject = try VAPIDSubject("mailto:ops@example.com")
        let subscription = try makeWebPushSubscription()
        let expiry = MicroFixtures.receivedAt.addingTimeInterval(12 * 3600)
        let token = VAPIDToken(key: key, subject: subject, audience: subscription.origin, expiresAt: expiry)
        try MicroCheckFailure.require(
            token.authorization.hasPrefix("vapid t=") && token.jwt.split(separator: ".").count == 3,
            "not a VAPID header"
        )
        return MicroWorkload {
            _ = VAPIDToken(key: key, subject: subject, audience: subscription.origin, expiresAt: expiry)
            return 1
        }
    }
}
