import Crypto
import Foundation

/// RFC 8292 checks of an `Authorization: vapid t=<jwt>, k=<key>` header, written from the RFC.
enum SimulatorVAPIDVerifier {
    struct Verified: Sendable, Hashable {
        var subject: String?
        var audience: String
        var expiresAt: Int64
        var publicKey: String
        /// `publicKey` decoded: the 65-byte point, compared with a subscription's `applicationServerKey`.
        var publicKeyBytes: [UInt8] = []
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
        return Verified(
            subject: subject,
            audience: audience,
            expiresAt: exp,
            publicKey: key,
            publicKeyBytes: keyBytes
        )
    }
}
