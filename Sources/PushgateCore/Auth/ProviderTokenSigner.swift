public import Crypto
public import Foundation

/// Signs APNs provider tokens: ES256 JWTs made from a team's `.p8` auth key.
///
/// The header is exactly `{"alg":"ES256","kid":"<key id>"}` and the claims exactly
/// `{"iss":"<team id>","iat":<whole seconds>}`, as Apple documents them (no `typ`, and never a
/// fractional `iat`). Each part is base64url without padding; the signature is the raw 64-byte
/// `r || s` form that JWS uses, not DER.
///
/// The private key never leaves this value: `description`, `debugDescription` and the reflection
/// mirror show the key id and team id only.
public struct ProviderTokenSigner: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The 10-character key id Apple assigned to the auth key (`kid`).
    public let keyID: String
    /// The 10-character team id of the developer account (`iss`).
    public let teamID: String

    private let privateKey: P256.Signing.PrivateKey
    /// `base64url(header) + "."`, fixed for the life of the signer.
    private let encodedHeaderAndDot: String

    /// A signer from a key in PEM form: PKCS#8 (`-----BEGIN PRIVATE KEY-----`, the form of Apple's
    /// `.p8` files) or SEC1 (`-----BEGIN EC PRIVATE KEY-----`).
    ///
    /// Apple's ids are 10 characters, but only what would break the JWT is refused: an empty id, or
    /// one with whitespace, quotes, backslashes, control or non-ASCII characters.
    public init(pemRepresentation pem: String, keyID: String, teamID: String) throws(ProviderTokenSignerError) {
        try self.init(privateKey: Self.parsePrivateKey(pem), keyID: keyID, teamID: teamID)
    }

    /// A signer from the `.p8` file at `path`.
    public init(contentsOfFile path: String, keyID: String, teamID: String) throws(ProviderTokenSignerError) {
        let pem: String
        do {
            pem = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw .unreadableKeyFile(path: path, detail: Self.safeName(of: error))
        }
        try self.init(pemRepresentation: pem, keyID: keyID, teamID: teamID)
    }

    public init(privateKey: P256.Signing.PrivateKey, keyID: String, teamID: String) throws(ProviderTokenSignerError) {
        guard Self.isValidIdentifier(keyID) else { throw .invalidKeyID }
        guard Self.isValidIdentifier(teamID) else { throw .invalidTeamID }
        self.keyID = keyID
        self.teamID = teamID
        self.privateKey = privateKey
        // The ids were checked to need no JSON escaping.
        self.encodedHeaderAndDot = Self.base64URL(Array(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8)) + "."
    }

    /// The public half of the key, for checking signatures (tests, the simulator's key registry).
    public var publicKey: P256.Signing.PublicKey { privateKey.publicKey }

    /// Signs a token claiming to be issued at `issuedAt`, rounded down to whole seconds (APNs wants
    /// an integer `iat`). The token's `issuedAt` is that rounded time.
    public func sign(issuedAt: Date) throws(ProviderTokenSignerError) -> ProviderToken {
        let seconds = Int64(issuedAt.timeIntervalSince1970.rounded(.down))
        var signingInput = encodedHeaderAndDot
        signingInput += Self.base64URL(Array(#"{"iss":"\#(teamID)","iat":\#(seconds)}"#.utf8))
        let signature: P256.Signing.ECDSASignature
        do {
            signature = try privateKey.signature(for: Array(signingInput.utf8))
        } catch {
            throw .signingFailed(detail: Self.safeName(of: error))
        }
        let jwt = signingInput + "." + Self.base64URL(Array(signature.rawRepresentation))
        return ProviderToken(jwt: jwt, issuedAt: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }

    public var description: String { "ProviderTokenSigner(keyID: \(keyID), teamID: \(teamID))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror {
        Mirror(self, children: ["keyID": keyID, "teamID": teamID], displayStyle: .struct)
    }

    // MARK: - Helpers

    private static func parsePrivateKey(_ pem: String) throws(ProviderTokenSignerError) -> P256.Signing.PrivateKey {
        // swift-crypto's PEM parser insists on 64-character lines with nothing around them. Files
        // that went through an editor or a secret store often have CRLF, indentation, trailing
        // blanks or rewrapped lines, so take the block apart ourselves and hand over the DER.
        let lines = pem.split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        guard let begin = lines.firstIndex(where: { $0.hasPrefix("-----BEGIN ") && $0.hasSuffix("-----") }),
            let end = lines.lastIndex(where: { $0.hasPrefix("-----END ") && $0.hasSuffix("-----") }),
            begin < end
        else {
            throw .malformedKey(detail: "no PEM block")
        }
        let label = lines[begin].dropFirst("-----BEGIN ".count).dropLast("-----".count)
        guard label == lines[end].dropFirst("-----END ".count).dropLast("-----".count) else {
            throw .malformedKey(detail: "PEM BEGIN and END labels differ")
        }
        guard label == "PRIVATE KEY" || label == "EC PRIVATE KEY" else {
            // The label is public information (e.g. "PUBLIC KEY", "ENCRYPTED PRIVATE KEY").
            throw .malformedKey(detail: "PEM block is \(label.prefix(40)), expected PRIVATE KEY or EC PRIVATE KEY")
        }
        guard let der = Data(base64Encoded: lines[(begin + 1)..<end].joined()), !der.isEmpty else {
            throw .malformedKey(detail: "PEM body is not base64")
        }
        do {
            // Tries PKCS#8 first, then SEC1; a key on another curve fails both.
            return try P256.Signing.PrivateKey(derRepresentation: der)
        } catch {
            throw .malformedKey(detail: "not a P-256 key (\(safeName(of: error)))")
        }
    }

    /// Printable ASCII without whitespace, `"` or `\`: what can go into the JSON header unescaped.
    static func isValidIdentifier(_ value: String) -> Bool {
        !value.isEmpty
            && value.utf8.allSatisfy { byte in
                byte > 0x20 && byte < 0x7f && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
            }
    }

    /// base64url without padding (RFC 7515 §2).
    static func base64URL(_ bytes: [UInt8]) -> String {
        var encoded = Data(bytes).base64EncodedString()
        encoded = encoded.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while encoded.last == "=" { encoded.removeLast() }
        return encoded
    }

    /// The type of an error (never its payload), so that nothing read from the key file can leak.
    private static func safeName(of error: any Error) -> String {
        String(describing: type(of: error))
    }
}
