import Foundation
import _CryptoExtras

extension FCMServiceAccount {
    /// Whether `other` is the same account with the same key (a reload that read the same JSON file again
    /// changes nothing). The token endpoint is not compared: `fcm.tokenUri` may replace it.
    public func isSameAccount(as other: FCMServiceAccount) -> Bool {
        projectID == other.projectID && clientEmail == other.clientEmail && privateKeyID == other.privateKeyID
            && privateKey.publicKey.derRepresentation == other.privateKey.publicKey.derRepresentation
    }
}
