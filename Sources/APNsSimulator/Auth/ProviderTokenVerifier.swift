import Crypto
import Foundation

/// Checks a provider token (ES256 JWT) the way Apple describes in "Establishing a token-based
/// connection to APNs": header `{"alg":"ES256","kid":...}`, claims `{"iss":<team>,"iat":<s>}`,
/// signature by the key named by `kid`.
///
/// Pure: it reads no clock. Token age is checked by the caller against its injected clock.
struct ProviderTokenVerifier: Sendable {
    struct Claims: Equatable, Sendable {
        var keyID: String
        var teamID: String
        var issuedAt: Int64
    }

    enum Failure: Error, Equatable {
        case malformed
        case unsupportedAlgorithm
        case unknownKey
        case wrongTeam
        case badSignature
    }

    private let keys: [String: ProviderTokenKey]

    init(keys: [ProviderTokenKey]) {
        var byID: [String: ProviderTokenKey] = [:]
        for key in keys { byID[key.keyID] = key }
        self.keys = byID
    }

    var isEmpty: Bool { self.keys.isEmpty }

    /// Verifies a compact JWT (without the `bearer ` prefix).
    func verify(_ token: Substring) -> Result<Claims, Failure> {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = Self.base64URLDecode(parts[0]),
            let claimsBytes = Self.base64URLDecode(parts[1]),
            let signatureBytes = Self.base64URLDecode(parts[2]),
            let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)),
            let claims = try? JSONDecoder().decode(ClaimsBody.self, from: Data(claimsBytes))
        else {
            return .failure(.malformed)
        }
        guard header.alg == "ES256" else { return .failure(.unsupportedAlgorithm) }
        guard let keyID = header.kid else { return .failure(.malformed) }
        guard let key = self.keys[keyID] else { return .failure(.unknownKey) }
        guard let issuer = claims.iss, let issuedAt = claims.iat else { return .failure(.malformed) }
        guard issuer == key.teamID else { return .failure(.wrongTeam) }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes) else {
            return .failure(.badSignature)
        }
        let signingInput = token[token.startIndex..<parts[1].endIndex]
        guard key.publicKey.isValidSignature(signature, for: Data(signingInput.utf8)) else {
            return .failure(.badSignature)
        }
        return .success(Claims(keyID: keyID, teamID: issuer, issuedAt: issuedAt))
    }

    private struct Header: Decodable {
        var alg: String?
        var kid: String?
    }

    /// `iat` decodes only from a JSON integer: `true` or `1.5` make the token malformed.
    private struct ClaimsBody: Decodable {
        var iss: String?
        var iat: Int64?
    }

    static func base64URLDecode(_ text: Substring) -> [UInt8]? {
        var base64 = String(text).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard !base64.contains("=") else { return nil }
        switch base64.count % 4 {
        case 0: break
        case 2: base64 += "=="
        case 3: base64 += "="
        default: return nil
        }
        guard let data = Data(base64Encoded: base64) else { return nil }
        return Array(data)
    }
}
