/// Why a VAPID key could not be read. The description never contains key material.
public struct VAPIDKeyError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Code: Hashable, Sendable {
        case notPEM
        case notP256PrivateKey
        case unreadableFile(String)
    }
    private let code: Code

    public static let notPEM = VAPIDKeyError(code: .notPEM)
    public static let notP256PrivateKey = VAPIDKeyError(code: .notP256PrivateKey)
    public static func unreadableFile(path: String) -> VAPIDKeyError { VAPIDKeyError(code: .unreadableFile(path)) }

    public var description: String {
        switch code {
        case .notPEM:
            "the VAPID key is not PEM (expected -----BEGIN PRIVATE KEY----- or -----BEGIN EC PRIVATE KEY-----)"
        case .notP256PrivateKey:
            "the VAPID key is not a P-256 private key (make one with: pushgate webpush generate-vapid-key)"
        case .unreadableFile(let path):
            "cannot read the VAPID key file \(path)"
        }
    }
}
