import Crypto
import Foundation

/// base64url for the simulator, on Foundation's base64 (it deliberately shares no code with the
/// gateway's WebPush module).
enum SimulatorBase64URL {
    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var standard = String(text).replacingOccurrences(of: "=", with: "")
        guard standard.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
            return nil
        }
        standard = standard.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
        return Data(base64Encoded: standard).map(Array.init)
    }
}

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
        // RFC 8188 §2.1: salt (16) ‖ rs (uint32) ‖ idlen (uint8) ‖ keyid (idlen).
        guard body.count >= 21 else { throw Failure("body shorter than the aes128gcm header") }
        let salt = Array(body[0..<16])
        let recordSize = body[16..<20].reduce(0) { $0 << 8 | Int($1) }
        let idLength = Int(body[20])
        guard recordSize >= 18 else { throw Failure("record size \(recordSize) below 18") }
        // RFC 8291 §4: the keyid is the application server's uncompressed public key.
        guard idLength == 65, body.count >= 21 + idLength else {
            throw Failure("keyid must be the 65-byte application server key (idlen \(idLength))")
        }
        let serverPublicBytes = Array(body[21..<(21 + idLength)])
        let records = Array(body[(21 + idLength)...])
        guard !records.isEmpty else { throw Failure("no record") }
        // Web Push messages are one record (RFC 8291 §4: "a push message MUST include ... a single record").
        guard records.count <= recordSize else { throw Failure("more than one record") }
        guard records.count >= 17 else { throw Failure("record shorter than its tag") }
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

/// RFC 8292 checks of an `Authorization: vapid t=<jwt>, k=<key>` header, written from the RFC.
enum SimulatorVAPIDVerifier {
    struct Verified: Sendable, Hashable {
        var subject: String?
        var audience: String
        var expiresAt: Int64
        var publicKey: String
    }

    struct Refusal: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    static func verify(_ header: String?, origin: String, now: Date) throws(Refusal) -> Verified {
        guard let header else { throw Refusal("no Authorization header (VAPID required)") }
        guard header.lowercased().hasPrefix("vapid ") else { throw Refusal("Authorization scheme must be vapid") }
        var parameters: [String: String] = [:]
        for part in header.dropFirst(6).split(separator: ",") {
            let pair = part.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if pair.count == 2 { parameters[pair[0].lowercased()] = String(pair[1]) }
        }
        guard let token = parameters["t"], let key = parameters["k"] else {
            throw Refusal("vapid needs t= (the JWT) and k= (the public key)")
        }
        guard let keyBytes = SimulatorBase64URL.decode(key), keyBytes.count == 65,
            let publicKey = try? P256.Signing.PublicKey(x963Representation: keyBytes)
        else { throw Refusal("k is not a base64url uncompressed P-256 public key") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = SimulatorBase64URL.decode(parts[0]),
            let claimsBytes = SimulatorBase64URL.decode(parts[1]),
            let signatureBytes = SimulatorBase64URL.decode(parts[2])
        else { throw Refusal("t is not a JWT") }
        guard let jwtHeader = (try? JSONSerialization.jsonObject(with: Data(headerBytes))) as? [String: Any],
            jwtHeader["alg"] as? String == "ES256"
        else { throw Refusal("the JWT's alg must be ES256") }
        if let type = jwtHeader["typ"] as? String, type.uppercased() != "JWT" {
            throw Refusal("the JWT's typ must be JWT")
        }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
            publicKey.isValidSignature(signature, for: Array("\(parts[0]).\(parts[1])".utf8))
        else { throw Refusal("the JWT's signature does not verify with k") }
        guard let claims = (try? JSONSerialization.jsonObject(with: Data(claimsBytes))) as? [String: Any] else {
            throw Refusal("the JWT's claims are not a JSON object")
        }
        guard let audience = claims["aud"] as? String else { throw Refusal("aud is missing") }
        guard audience == origin else { throw Refusal("aud \(audience) is not this push service's origin \(origin)") }
        guard let exp = (claims["exp"] as? NSNumber)?.int64Value else { throw Refusal("exp is missing") }
        let nowSeconds = Int64(now.timeIntervalSince1970.rounded(.down))
        guard exp > nowSeconds else { throw Refusal("the JWT expired") }
        guard exp <= nowSeconds + 24 * 3600 else { throw Refusal("exp is more than 24 hours ahead") }
        let subject = claims["sub"] as? String
        if let subject, !(subject.hasPrefix("mailto:") || subject.hasPrefix("https:")) {
            throw Refusal("sub must be a mailto: or https: URI")
        }
        return Verified(subject: subject, audience: audience, expiresAt: exp, publicKey: key)
    }
}
