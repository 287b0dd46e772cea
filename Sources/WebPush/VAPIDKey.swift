public import Crypto
import Foundation
import PushgateCore

/// An application server's VAPID key (RFC 8292): a P-256 key pair, kept as a PEM file
/// (`app.NAME.webpush.vapidKey`). Its public half, base64url of the 65-byte uncompressed point, is what
/// the web page passes to `pushManager.subscribe({applicationServerKey})` and what every message's
/// `Authorization: vapid … k=` carries.
///
/// The private key never leaves this value: `description`, `debugDescription` and the mirror show the
/// public key only.
public struct VAPIDKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    let privateKey: P256.Signing.PrivateKey
    /// `k`: base64url (unpadded) of the uncompressed public key.
    public let publicKeyBase64URL: String

    public init(privateKey: P256.Signing.PrivateKey) {
        self.privateKey = privateKey
        self.publicKeyBase64URL = Base64URL.encode(privateKey.publicKey.x963Representation)
    }

    /// A fresh key (`pushgate webpush generate-vapid-key`).
    public static func generate() -> VAPIDKey { VAPIDKey(privateKey: P256.Signing.PrivateKey()) }

    /// A key from PEM: PKCS#8 (`BEGIN PRIVATE KEY`, what `generate-vapid-key` and `openssl genpkey` write)
    /// or SEC1 (`BEGIN EC PRIVATE KEY`, what `openssl ecparam -genkey` and py_vapid write).
    public init(pemRepresentation pem: String) throws(VAPIDKeyError) {
        guard pem.contains("-----BEGIN") else { throw .notPEM }
        guard let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) else { throw .notP256PrivateKey }
        self.init(privateKey: key)
    }

    public init(contentsOfFile path: String) throws(VAPIDKeyError) {
        let pem: String
        do {
            pem = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw .unreadableFile(path: path)
        }
        try self.init(pemRepresentation: pem)
    }

    /// The private key as PKCS#8 PEM: what the key file holds.
    public var pemRepresentation: String { privateKey.pemRepresentation }
    public var publicKey: P256.Signing.PublicKey { privateKey.publicKey }

    public var description: String { "VAPIDKey(public: \(publicKeyBase64URL))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["public": publicKeyBase64URL], displayStyle: .struct) }
}
