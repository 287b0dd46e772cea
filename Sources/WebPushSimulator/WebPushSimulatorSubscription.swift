import Foundation

/// A subscription the simulator made, as a browser's `PushSubscription` would show it, plus the
/// private half a browser keeps to itself (for tests that decrypt with other code).
public struct WebPushSimulatorSubscription: Sendable, Hashable {
    public var id: String
    /// Index into the simulator's origins.
    public var originIndex: Int
    public var endpoint: String
    /// base64url of the 65-byte uncompressed public key.
    public var p256dh: String
    /// base64url of the 16-byte authentication secret.
    public var auth: String
    /// base64url of the 32-byte private scalar (what `http_ece` needs to decrypt).
    public var privateKey: String
    /// The VAPID public key the subscription was made for (`applicationServerKey`), when one was given:
    /// messages signed with another key are refused with 403.
    public var applicationServerKey: String?

    /// `PushSubscription.toJSON()`: `{"endpoint", "expirationTime": null, "keys": {"p256dh", "auth"}}`.
    public var json: String {
        let object: [String: Any] = [
            "endpoint": endpoint, "expirationTime": NSNull(), "keys": ["p256dh": p256dh, "auth": auth],
        ]
        let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        return data.map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
