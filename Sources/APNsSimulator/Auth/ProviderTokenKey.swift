public import Crypto

/// A provider-token signing key the simulator accepts: Apple's key ID, the team it belongs to,
/// and the public half of the `.p8` key.
public struct ProviderTokenKey: Sendable {
    public var keyID: String
    public var teamID: String
    public var publicKey: P256.Signing.PublicKey

    public init(keyID: String, teamID: String, publicKey: P256.Signing.PublicKey) {
        self.keyID = keyID
        self.teamID = teamID
        self.publicKey = publicKey
    }

    /// - Parameter publicKeyPEM: a `-----BEGIN PUBLIC KEY-----` document (SubjectPublicKeyInfo),
    ///   or a `.p8` private key, whose public half is used.
    public init(keyID: String, teamID: String, publicKeyPEM: String) throws {
        let publicKey: P256.Signing.PublicKey
        if let key = try? P256.Signing.PublicKey(pemRepresentation: publicKeyPEM) {
            publicKey = key
        } else if let privateKey = try? P256.Signing.PrivateKey(pemRepresentation: publicKeyPEM) {
            publicKey = privateKey.publicKey
        } else {
            throw SimulatorError.invalidConfiguration(
                key: "token-key \(keyID)",
                problem: "not a P-256 public key (or .p8 private key) in PEM form"
            )
        }
        self.init(keyID: keyID, teamID: teamID, publicKey: publicKey)
    }
}
