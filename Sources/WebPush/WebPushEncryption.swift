public import Crypto
import Foundation
public import PushgateCore

/// Message encryption for Web Push (RFC 8291) in the `aes128gcm` content coding (RFC 8188): the body
/// of every push message.
///
/// Per message: a fresh ECDH P-256 key pair (the application server's, `as`) and a random 16-byte salt.
///
///     ecdh_secret = ECDH(as_private, ua_public)
///     IKM   = HKDF-SHA-256(salt: auth_secret, ikm: ecdh_secret,
///                          info: "WebPush: info" 0x00 ‖ ua_public ‖ as_public, 32 bytes)
///     CEK   = HKDF-SHA-256(salt: salt, ikm: IKM, info: "Content-Encoding: aes128gcm" 0x00, 16 bytes)
///     NONCE = HKDF-SHA-256(salt: salt, ikm: IKM, info: "Content-Encoding: nonce" 0x00, 12 bytes)
///     body  = salt ‖ rs (4096, 4 bytes) ‖ idlen (65) ‖ as_public ‖ AES-128-GCM(CEK, NONCE, plaintext ‖ 0x02)
///
/// One record only (the last, hence the delimiter 0x02 and no padding), so the body is the 86-byte
/// header, the plaintext, one byte and the 16-byte tag: at most 4,096 bytes, the most a push service
/// must accept (RFC 8030 §7.2), for at most 3,993 bytes of plaintext.
public enum WebPushEncryption {
    public static let headerByteCount = 86
    public static let recordSize = 4096
    public static let tagByteCount = 16
    public static let saltByteCount = 16
    /// 4,096 - 86 (header) - 1 (delimiter) - 16 (tag): `WebPushMessage.maximumBytes`, which the request
    /// schema checks before storing (a test keeps the two equal).
    public static let maximumPlaintextBytes = recordSize - headerByteCount - 1 - tagByteCount

    /// Encrypts `plaintext` for `subscription` with a fresh key pair and salt.
    public static func encrypt(
        _ plaintext: [UInt8],
        for subscription: WebPushSubscription,
        field: String = "payload"
    ) throws(ValidationError) -> [UInt8] {
        var generator = BlockRandomNumberGenerator()
        return try encrypt(
            plaintext,
            userAgentPublicKey: subscription.userAgentPublicKey,
            userAgentPublicKeyBytes: subscription.userAgentPublicKeyBytes,
            authSecret: subscription.authSecret,
            serverKey: freshServerKey(using: &generator),
            salt: randomBytes(saltByteCount, using: &generator),
            field: field
        )
    }

    /// A fresh ECDH key pair for one message: a uniformly random scalar in [1, n-1] (32 random bytes,
    /// drawn again in the 2^-32 case that they are 0 or not below the group order, which BoringSSL
    /// refuses), its public point computed once.
    ///
    /// Not `P256.KeyAgreement.PrivateKey()`: on Linux, swift-crypto runs BoringSSL's FIPS pairwise
    /// consistency test on every key it generates (a check of the public point, an ECDSA signature and
    /// its verification), which cost more than the message's ECDH itself: about half of the
    /// encryption's CPU (`pushgate-bench micro --cases webpush-encrypt`). The key is as random; the
    /// self-test guards against a broken generator implementation, not against a weak key.
    package static func freshServerKey(
        using generator: inout some RandomNumberGenerator
    ) -> P256.KeyAgreement.PrivateKey {
        while true {
            if let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: randomBytes(32, using: &generator)) {
                return key
            }
        }
    }

    /// `count` random bytes (a multiple of 8), eight per call of the generator.
    private static func randomBytes(_ count: Int, using generator: inout some RandomNumberGenerator) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        for _ in 0..<(count / 8) {
            withUnsafeBytes(of: generator.next() as UInt64) { bytes += $0 }
        }
        return bytes
    }

    /// Encrypts with the given server key pair and salt: for test vectors (RFC 8291 §5) only; a real
    /// message must never reuse either.
    public static func encrypt(
        _ plaintext: [UInt8],
        userAgentPublicKey: P256.KeyAgreement.PublicKey,
        authSecret: [UInt8],
        serverKey: P256.KeyAgreement.PrivateKey,
        salt: [UInt8],
        field: String = "payload"
    ) throws(ValidationError) -> [UInt8] {
        try encrypt(
            plaintext,
            userAgentPublicKey: userAgentPublicKey,
            userAgentPublicKeyBytes: Array(userAgentPublicKey.x963Representation),
            authSecret: authSecret,
            serverKey: serverKey,
            salt: salt,
            field: field
        )
    }

    /// `userAgentPublicKeyBytes`: the key's x9.63 form, which the subscription keeps (serialising the key
    /// again costs a field inversion per message).
    private static func encrypt(
        _ plaintext: [UInt8],
        userAgentPublicKey: P256.KeyAgreement.PublicKey,
        userAgentPublicKeyBytes userAgentPublic: [UInt8],
        authSecret: [UInt8],
        serverKey: P256.KeyAgreement.PrivateKey,
        salt: [UInt8],
        field: String
    ) throws(ValidationError) -> [UInt8] {
        guard plaintext.count <= maximumPlaintextBytes else {
            throw ValidationError(
                code: .payloadTooLarge,
                field: field,
                message:
                    "the Web Push message is \(plaintext.count) bytes; at most \(maximumPlaintextBytes) fit in"
                    + " the \(recordSize) bytes a push service accepts once encrypted"
            )
        }
        precondition(salt.count == saltByteCount, "the aes128gcm salt is 16 bytes")
        let serverPublic = serverKey.publicKey.x963Representation
        do {
            let shared = try serverKey.sharedSecretFromKeyAgreement(with: userAgentPublicKey)
            var keyInfo = Array("WebPush: info".utf8) + [0]
            keyInfo += userAgentPublic
            keyInfo += serverPublic
            // HKDF-SHA-256 (RFC 5869) written out as its HMACs: each output is at most one block (32 bytes),
            // so an expand is one HMAC of info ‖ 0x01. swift-crypto's HKDF type added about 5 µs per
            // message in its generic plumbing (webpush-encrypt: 90 -> 85 µs).
            let ecdhSecret = shared.withUnsafeBytes { Array($0) }
            keyInfo.append(1)
            let keyPRK = hmacSHA256(key: authSecret, ecdhSecret)
            let inputKeyMaterial = hmacSHA256(key: keyPRK, keyInfo)
            // One extract (PRK = HMAC(salt, IKM)) for both expansions, CEK and NONCE.
            let pseudoRandomKey = hmacSHA256(key: salt, inputKeyMaterial)
            let contentKey = SymmetricKey(data: hmacSHA256(key: pseudoRandomKey, Self.contentKeyInfo)[0..<16])
            let nonceBytes = Array(hmacSHA256(key: pseudoRandomKey, Self.nonceInfo)[0..<12])
            var record = plaintext
            record.append(0x02)  // the last record's delimiter, no padding after it
            let sealed = try AES.GCM.seal(record, using: contentKey, nonce: AES.GCM.Nonce(data: nonceBytes))

            var body: [UInt8] = []
            body.reserveCapacity(headerByteCount + record.count + tagByteCount)
            body += salt
            body += [UInt8(recordSize >> 24 & 0xff), UInt8(recordSize >> 16 & 0xff)]
            body += [UInt8(recordSize >> 8 & 0xff), UInt8(recordSize & 0xff)]
            body.append(UInt8(serverPublic.count))
            body += serverPublic
            body += sealed.ciphertext
            body += sealed.tag
            return body
        } catch {
            // ECDH with a validated point, HKDF and AES-GCM with valid sizes do not fail.
            preconditionFailure("aes128gcm encryption failed: \(error)")
        }
    }

    /// HMAC-SHA-256 (RFC 2104) of `message` under `key`, a key of at most one 64-byte block (every key
    /// here is 16 or 32 bytes): SHA-256 of (key ⊕ opad) ‖ SHA-256((key ⊕ ipad) ‖ message). Not swift-crypto's
    /// `HMAC`: its generic set-up of the key was about 5 % of the gateway's CPU for a Web Push broadcast
    /// (five HMACs a message). `WebPushEncryptionTests` compares the two.
    package static func hmacSHA256(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        precondition(key.count <= 64, "an HMAC key here is at most one SHA-256 block")
        var block = [UInt8](repeating: 0x36, count: 64)
        for index in key.indices { block[index] ^= key[index] }
        var inner = SHA256()
        inner.update(data: block)
        inner.update(data: message)
        let innerDigest = inner.finalize()
        for index in block.indices { block[index] ^= 0x36 ^ 0x5c }
        var outer = SHA256()
        outer.update(data: block)
        innerDigest.withUnsafeBytes { outer.update(bufferPointer: $0) }
        return outer.finalize().withUnsafeBytes { Array($0) }
    }

    /// The expansions' info, with HKDF's block counter 0x01 already appended.
    private static let contentKeyInfo = Array("Content-Encoding: aes128gcm".utf8) + [0, 1]
    private static let nonceInfo = Array("Content-Encoding: nonce".utf8) + [0, 1]
}

/// The system's random bytes, 64 at a time: one `getentropy` call (the `getrandom` system call) for a
/// message's key and salt (48 bytes), where `SystemRandomNumberGenerator` makes a system call per 8 bytes
/// (six a message, about 2 % of the gateway's CPU in a Web Push broadcast). The bytes are the same
/// kernel generator's.
struct BlockRandomNumberGenerator: RandomNumberGenerator {
    private var words = [UInt64](repeating: 0, count: 8)
    private var used = 8

    mutating func next() -> UInt64 {
        if used == words.count {
            #if canImport(Glibc)
            let result = words.withUnsafeMutableBytes { getentropy($0.baseAddress, $0.count) }
            precondition(result == 0, "getentropy failed")
            #else
            var system = SystemRandomNumberGenerator()
            for index in words.indices { words[index] = system.next() }
            #endif
            used = 0
        }
        defer { used += 1 }
        return words[used]
    }
}
