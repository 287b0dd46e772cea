import Crypto
import Foundation
import PushgateCore
import Testing

@testable import WebPush

@Suite("Web Push: aes128gcm encryption (RFC 8291)")
struct WebPushEncryptionTests {
    @Test("RFC 8291 section 5's example is reproduced byte for byte")
    func rfcExample() throws {
        let serverKey = try P256.KeyAgreement.PrivateKey(
            rawRepresentation: base64URLDecoded(RFC8291Example.serverPrivateKey)
        )
        #expect(base64URLEncoded(serverKey.publicKey.x963Representation) == RFC8291Example.serverPublicKey)
        let body = try WebPushEncryption.encrypt(
            Array(RFC8291Example.plaintext.utf8),
            userAgentPublicKey: P256.KeyAgreement.PublicKey(
                x963Representation: base64URLDecoded(RFC8291Example.userAgentPublicKey)
            ),
            authSecret: base64URLDecoded(RFC8291Example.authSecret),
            serverKey: serverKey,
            salt: base64URLDecoded(RFC8291Example.salt)
        )
        #expect(base64URLEncoded(body) == RFC8291Example.body)
    }

    @Test("each message has a fresh key and salt; header 86 bytes; body = plaintext + 103")
    func freshPerMessage() throws {
        let subscription = try WebPushSubscription(jsonBytes: subscriptionJSON())
        let plaintext = Array(#"{"aps":{"alert":"hi"}}"#.utf8)
        let first = try WebPushEncryption.encrypt(plaintext, for: subscription)
        let second = try WebPushEncryption.encrypt(plaintext, for: subscription)
        #expect(first.count == plaintext.count + 86 + 1 + 16)
        #expect(Array(first[0..<16]) != Array(second[0..<16]))  // salt
        #expect(Array(first[21..<86]) != Array(second[21..<86]))  // server public key
        #expect(Array(first[16..<20]) == [0, 0, 0x10, 0])  // rs = 4096
        #expect(first[20] == 65 && first[21] == 0x04)
        // The user agent (RFC 8291 §5's private key) decrypts it.
        let userAgent = try P256.KeyAgreement.PrivateKey(
            rawRepresentation: base64URLDecoded(RFC8291Example.userAgentPrivateKey)
        )
        #expect(try decrypt(first, userAgent: userAgent, auth: subscription.authSecret) == plaintext + [2])
    }

    @Test(
        "a message's server key is a fresh random scalar, its public point the scalar times G; a draw out of range is drawn again"
    )
    func freshServerKeys() throws {
        var generator = SystemRandomNumberGenerator()
        let keys = (0..<200).map { _ in WebPushEncryption.freshServerKey(using: &generator) }
        #expect(Set(keys.map(\.rawRepresentation)).count == 200)
        for key in keys.prefix(5) {
            let again = try P256.KeyAgreement.PrivateKey(rawRepresentation: key.rawRepresentation)
            #expect(again.publicKey.x963Representation == key.publicKey.x963Representation)
        }
        // All-ones is above the group order: refused, so the first key comes from the second draw.
        var scripted = ScriptedGenerator(values: [.max, .max, .max, .max, 0, 0, 0, 7])
        let drawnAgain = WebPushEncryption.freshServerKey(using: &scripted)
        #expect(
            drawnAgain.rawRepresentation == Data(repeating: 0, count: 24)
                + Data([0x07] + [UInt8](repeating: 0, count: 7))
        )
    }

    @Test("the HKDF's HMAC-SHA-256 is swift-crypto's HMAC, for keys of 0 to 64 bytes and messages of 0 to 200")
    func hmacIsSwiftCryptos() {
        for keyLength in [0, 1, 16, 31, 32, 33, 63, 64] {
            for messageLength in [0, 1, 55, 56, 64, 119, 200] {
                let key = (0..<keyLength).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
                let message = (0..<messageLength).map { UInt8(truncatingIfNeeded: $0 &* 101 &+ keyLength) }
                let expected = Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
                #expect(
                    WebPushEncryption.hmacSHA256(key: key, message) == expected,
                    "key \(keyLength) bytes, message \(messageLength) bytes"
                )
            }
        }
    }

    @Test("3,993 bytes of plaintext make a 4,096-byte body; 3,994 are refused naming the field")
    func limit() throws {
        let subscription = try WebPushSubscription(jsonBytes: subscriptionJSON())
        #expect(WebPushEncryption.maximumPlaintextBytes == 3993)
        #expect(WebPushMessage.maximumBytes == WebPushEncryption.maximumPlaintextBytes)
        let body = try WebPushEncryption.encrypt([UInt8](repeating: 0x61, count: 3993), for: subscription)
        #expect(body.count == 4096)
        #expect(throws: ValidationError(code: .payloadTooLarge, field: "webpush", message: "")) {
            try WebPushEncryption.encrypt([UInt8](repeating: 0x61, count: 3994), for: subscription, field: "webpush")
        }
    }

    /// RFC 8291 §3.4 from the user agent's side, written here from the RFC with CryptoKit's HKDF (the
    /// simulator and Python's http_ece are the independent checks).
    private func decrypt(_ body: [UInt8], userAgent: P256.KeyAgreement.PrivateKey, auth: [UInt8]) throws -> [UInt8] {
        let salt = Array(body[0..<16])
        let serverPublic = Array(body[21..<86])
        let shared = try userAgent.sharedSecretFromKeyAgreement(
            with: P256.KeyAgreement.PublicKey(x963Representation: serverPublic)
        )
        let info = Array("WebPush: info".utf8) + [0] + userAgent.publicKey.x963Representation + serverPublic
        let ikm = shared.hkdfDerivedSymmetricKey(using: SHA256.self, salt: auth, sharedInfo: info, outputByteCount: 32)
        let key = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: ikm,
            salt: salt,
            info: Array("Content-Encoding: aes128gcm".utf8) + [0],
            outputByteCount: 16
        )
        let nonce = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: ikm,
            salt: salt,
            info: Array("Content-Encoding: nonce".utf8) + [0],
            outputByteCount: 12
        ).withUnsafeBytes { Array($0) }
        let sealed = try AES.GCM.SealedBox(
            nonce: AES.GCM.Nonce(data: nonce),
            ciphertext: body[86..<(body.count - 16)],
            tag: body[(body.count - 16)...]
        )
        return Array(try AES.GCM.open(sealed, using: key))
    }
}

/// Hands out the given values in order (for the key draw's rejection of an out-of-range scalar).
struct ScriptedGenerator: RandomNumberGenerator {
    var values: [UInt64]
    mutating func next() -> UInt64 { values.removeFirst() }
}
