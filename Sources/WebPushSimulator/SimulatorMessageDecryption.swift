import Crypto
import Foundation

/// The user agent's side of RFC 8291 over RFC 8188's `aes128gcm`, written from the RFCs: what a
/// browser does with a push message it receives.
enum SimulatorMessageDecryption {
    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// The plaintext of `body`, or why it cannot be read.
    static func decrypt(
        _ body: [UInt8],
        userAgentKey: P256.KeyAgreement.PrivateKey,
        authSecret: [UInt8]
    ) throws(Failure) -> [UInt8] {
        let header: SimulatorRecordHeader
        do {
            header = try SimulatorRecordHeader(parsing: body)
        } catch {
            throw Failure(error.description)
        }
        let salt = Array(header.salt)
        let serverPublicBytes = Array(header.serverPublicKey)
        let records = header.record
        let serverPublic: P256.KeyAgreement.PublicKey
        do {
            serverPublic = try P256.KeyAgreement.PublicKey(x963Representation: serverPublicBytes)
        } catch {
            throw Failure("keyid is not a P-256 public key")
        }
        let ikm: SymmetricKey
        do {
            let ecdh = try userAgentKey.sharedSecretFromKeyAgreement(with: serverPublic)
            // RFC 8291 §3.3: PRK_key = HMAC(auth_secret, ecdh_secret); IKM = HMAC(PRK_key, key_info ‖ 0x01).
            var keyInfo = Array("WebPush: info".utf8)
            keyInfo.append(0)
            keyInfo += userAgentKey.publicKey.x963Representation
            keyInfo += serverPublicBytes
            let prkKey = ecdh.withUnsafeBytes { secret in
                Array(HMAC<SHA256>.authenticationCode(for: Array(secret), using: SymmetricKey(data: authSecret)))
            }
            ikm = SymmetricKey(
                data: Array(HMAC<SHA256>.authenticationCode(for: keyInfo + [1], using: SymmetricKey(data: prkKey)))
            )
        } catch {
            throw Failure("ECDH failed")
        }
        // RFC 8188 §2.2, §2.3: PRK = HMAC(salt, IKM); CEK and NONCE from PRK.
        let prk = SymmetricKey(
            data: Array(
                ikm.withUnsafeBytes { HMAC<SHA256>.authenticationCode(for: Array($0), using: .init(data: salt)) }
            )
        )
        let cek = Array(
            HMAC<SHA256>.authenticationCode(for: Array("Content-Encoding: aes128gcm".utf8) + [0, 1], using: prk)
        ).prefix(16)
        let nonce = Array(
            HMAC<SHA256>.authenticationCode(for: Array("Content-Encoding: nonce".utf8) + [0, 1], using: prk)
        ).prefix(12)
        let padded: [UInt8]
        do {
            let box = try AES.GCM.SealedBox(
                nonce: AES.GCM.Nonce(data: Array(nonce)),
                ciphertext: records.dropLast(16),
                tag: records.suffix(16)
            )
            padded = Array(try AES.GCM.open(box, using: SymmetricKey(data: Array(cek))))
        } catch {
            throw Failure("the record does not decrypt (wrong keys, auth secret or corrupted body)")
        }
        // RFC 8188 §2: data ‖ delimiter ‖ zero padding; the last record's delimiter is 0x02.
        guard let delimiter = padded.lastIndex(where: { $0 != 0 }) else { throw Failure("no padding delimiter") }
        guard padded[delimiter] == 0x02 else {
            throw Failure("padding delimiter \(padded[delimiter]) is not 0x02 (the last record's)")
        }
        return Array(padded[..<delimiter])
    }
}
