public import Foundation

/// A message a subscription received (201): what the browser's service worker would get.
public struct WebPushReceivedMessage: Sendable, Hashable {
    public var subscriptionID: String
    public var originIndex: Int
    /// The decrypted payload (nil when the simulator was told not to decrypt).
    public var plaintext: [UInt8]?
    public var ttl: Int
    public var urgency: String?
    public var topic: String?
    /// The VAPID claims that authorised it.
    public var vapidSubject: String?
    public var vapidAudience: String
    public var vapidExpiresAt: Int64
    public var vapidPublicKey: String
    /// 1 or 2.
    public var httpVersion: Int
    public var bodyBytes: Int
    public var receivedAt: Date

    public var text: String? { plaintext.map { String(decoding: $0, as: UTF8.self) } }
}
