import Foundation
public import _CryptoExtras

/// A service account the simulator's token endpoint knows: assertions signed by its key, claiming its
/// email, get access tokens for its project.
public struct FCMSimulatorAccount: Sendable {
    public var clientEmail: String
    public var projectID: String
    /// When set, the assertion's `kid` must name it.
    public var keyID: String?
    public var publicKey: _RSA.Signing.PublicKey

    public init(clientEmail: String, projectID: String, keyID: String? = nil, publicKey: _RSA.Signing.PublicKey) {
        self.clientEmail = clientEmail
        self.projectID = projectID
        self.keyID = keyID
        self.publicKey = publicKey
    }
}

/// A throwaway service account for tests and `--simulator`: a fresh 2048-bit RSA key and the JSON key
/// file Google would hand out for it, pointing at the simulator's token endpoint.
public struct FCMThrowawayServiceAccount: Sendable {
    public let projectID: String
    public let clientEmail: String
    public let privateKeyID: String
    public let tokenURI: String
    /// PKCS#8 PEM, as in Google's files.
    public let privateKeyPEM: String
    public let account: FCMSimulatorAccount

    public init(projectID: String = "pushgate-simulated", tokenURI: String) throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        var generator = SystemRandomNumberGenerator()
        let keyID = (0..<5).map { _ in String(format: "%08x", UInt32.random(in: .min ... .max, using: &generator)) }
            .joined()
        self.projectID = projectID
        self.clientEmail = "pushgate-simulator@\(projectID).iam.gserviceaccount.com"
        self.privateKeyID = keyID
        self.tokenURI = tokenURI
        self.privateKeyPEM = key.pkcs8PEMRepresentation
        self.account = FCMSimulatorAccount(
            clientEmail: clientEmail,
            projectID: projectID,
            keyID: keyID,
            publicKey: key.publicKey
        )
    }

    /// The service-account JSON file.
    public var jsonBytes: [UInt8] {
        let fields: [String: String] = [
            "type": "service_account", "project_id": projectID, "private_key_id": privateKeyID,
            "private_key": privateKeyPEM, "client_email": clientEmail, "client_id": "100000000000000000000",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": tokenURI,
        ]
        let data = try? JSONSerialization.data(
            withJSONObject: fields,
            options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        )
        return data.map(Array.init) ?? []
    }

    /// Writes the JSON file (mode 0600: it holds a private key).
    public func write(to path: String) throws {
        try Data(jsonBytes).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
    }
}
