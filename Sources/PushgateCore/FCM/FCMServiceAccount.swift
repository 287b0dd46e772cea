public import Foundation
public import _CryptoExtras

/// A Google service account, as read from the JSON key file the Firebase console hands out.
///
/// Only the fields FCM needs are read: `type` (must be `service_account`), `project_id`,
/// `private_key_id`, `private_key` (an RSA key in PEM form), `client_email` and `token_uri`. Other
/// fields are ignored. The private key never leaves this value: `description` and the reflection
/// mirror show the project and the account's email only.
public struct FCMServiceAccount: Sendable, CustomStringConvertible, CustomReflectable {
    public let projectID: String
    /// `kid` of the assertion header.
    public let privateKeyID: String
    /// `iss` of the assertion.
    public let clientEmail: String
    /// `aud` of the assertion, and where it is exchanged for an access token.
    public let tokenURI: URL
    let privateKey: _RSA.Signing.PrivateKey

    public init(
        projectID: String,
        privateKeyID: String,
        clientEmail: String,
        tokenURI: URL,
        privateKey: _RSA.Signing.PrivateKey
    ) {
        self.projectID = projectID
        self.privateKeyID = privateKeyID
        self.clientEmail = clientEmail
        self.tokenURI = tokenURI
        self.privateKey = privateKey
    }

    /// Parses the service-account JSON, naming the first field that is wrong.
    public init(jsonBytes: [UInt8]) throws(FCMCredentialError) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(jsonBytes)) as? [String: Any] else {
            throw .malformedJSON
        }
        func string(_ name: String) throws(FCMCredentialError) -> String {
            guard let value = object[name] as? String, !value.isEmpty else { throw .missingField(name) }
            return value
        }
        guard try string("type") == "service_account" else { throw .wrongType }
        let projectID = try string("project_id")
        let privateKeyID = try string("private_key_id")
        let pem = try string("private_key")
        let clientEmail = try string("client_email")
        let tokenURIText = try string("token_uri")
        guard let tokenURI = URL(string: tokenURIText), Self.isAcceptableTokenURI(tokenURI) else {
            throw .invalidTokenURI
        }
        let privateKey: _RSA.Signing.PrivateKey
        do {
            privateKey = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw .malformedPrivateKey(detail: String(describing: type(of: error)))
        }
        self.init(
            projectID: projectID,
            privateKeyID: privateKeyID,
            clientEmail: clientEmail,
            tokenURI: tokenURI,
            privateKey: privateKey
        )
    }

    /// Reads and parses the service-account file at `path`.
    public init(contentsOfFile path: String) throws(FCMCredentialError) {
        let bytes: [UInt8]
        do {
            bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw .unreadableFile(path: path, detail: String(describing: type(of: error)))
        }
        try self.init(jsonBytes: bytes)
    }

    /// The public half of the key, for checking assertions (tests, the simulator's account registry).
    public var publicKey: _RSA.Signing.PublicKey { privateKey.publicKey }

    /// `:path` of `messages:send` for this account's project.
    public var sendPath: String { "/v1/projects/\(projectID)/messages:send" }

    public var description: String { "FCMServiceAccount(project: \(projectID), email: \(clientEmail))" }
    public var customMirror: Mirror {
        Mirror(self, children: ["projectID": projectID, "clientEmail": clientEmail], displayStyle: .struct)
    }
}

extension FCMServiceAccount {
    /// The same account exchanging its assertions at `tokenURI` (a simulator's, with `--fcm-token-uri`).
    public func replacingTokenURI(_ tokenURI: URL) -> FCMServiceAccount {
        FCMServiceAccount(
            projectID: projectID,
            privateKeyID: privateKeyID,
            clientEmail: clientEmail,
            tokenURI: tokenURI,
            privateKey: privateKey
        )
    }
}

extension FCMServiceAccount {
    /// Where access tokens may be fetched from: an absolute https URL; plain http only on loopback
    /// (127.0.0.0/8, ::1, localhost), for a stand-in on the same machine. The assertion and the token
    /// never cross a network unencrypted.
    public static func isAcceptableTokenURI(_ url: URL) -> Bool {
        guard let host = url.host, !host.isEmpty else { return false }
        switch url.scheme?.lowercased() {
        case "https": return true
        case "http":
            let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")).lowercased()
            if bare == "localhost" || bare == "::1" { return true }
            let octets = bare.split(separator: ".", omittingEmptySubsequences: false)
            return octets.count == 4 && octets.first == "127" && octets.allSatisfy { UInt8($0) != nil }
        default: return false
        }
    }
}
