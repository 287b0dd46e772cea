public import Foundation

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

/// An answer the simulator gives instead of 201, for the next `count` messages that pass its checks.
public struct WebPushScriptedAnswer: Sendable, Hashable {
    /// The status (404, 410, 413, 429, 500, 503...); ignored when `dropsConnection`.
    public var status: Int
    /// `Retry-After`, as sent (seconds or an HTTP-date).
    public var retryAfter: String?
    public var count: Int
    /// Only messages to this subscription, or to this origin; neither: any.
    public var subscriptionID: String?
    public var originIndex: Int?
    /// Held this much longer before it is written.
    public var latencyMilliseconds: Int
    /// No answer: the connection is closed.
    public var dropsConnection: Bool

    public init(
        status: Int = 503,
        retryAfter: String? = nil,
        count: Int = 1,
        subscriptionID: String? = nil,
        originIndex: Int? = nil,
        latencyMilliseconds: Int = 0,
        dropsConnection: Bool = false
    ) {
        self.status = status
        self.retryAfter = retryAfter
        self.count = count
        self.subscriptionID = subscriptionID
        self.originIndex = originIndex
        self.latencyMilliseconds = latencyMilliseconds
        self.dropsConnection = dropsConnection
    }

    func applies(to subscriptionID: String, originIndex: Int) -> Bool {
        (self.subscriptionID == nil || self.subscriptionID == subscriptionID)
            && (self.originIndex == nil || self.originIndex == originIndex)
    }
}

/// Counters of what the simulator saw.
public struct WebPushSimulatorStats: Sendable, Hashable {
    /// Push requests, all answers included.
    public var requests = 0
    /// Answered 201.
    public var delivered = 0
    /// Answered otherwise (refused by a check, or scripted), by status; dropped connections count as 0.
    public var answeredByStatus: [Int: Int] = [:]
    /// Requests that came over HTTP/2 and HTTP/1.1.
    public var http2Requests = 0
    public var http1Requests = 0
}
