import Crypto
public import Foundation
public import PushgateCore

/// The headers of one Web Push message (RFC 8030 §5), besides `Authorization` (``VAPIDToken``):
/// `TTL`, `Urgency`, `Topic` when the request has a `key`, and the content coding.
public struct WebPushHeaders: Hashable, Sendable {
    /// Seconds a push service keeps an undelivered message at most: 28 days, FCM's and Mozilla's
    /// ceiling. A longer `TTL` is lowered by the service anyway (RFC 8030 §5.2 lets it).
    public static let maximumTTLSeconds: Int64 = 28 * 24 * 3600
    public static let maximumTopicLength = 32

    public var ttl: Int64
    public var urgency: WebPushUrgency
    public var topic: String?

    /// From the request's fields, at `sentAt` (a retry sent later gets the TTL that is left then):
    /// - `TTL`: `expiration` 0 ("once", pushd's default) → 0, deliver now or drop; a UNIX time → the
    ///   seconds left, at least 0 and at most ``maximumTTLSeconds``; no expiration (the APNs storage
    ///   policy) → ``maximumTTLSeconds``;
    /// - `Urgency`: ``WebPushUrgency/init(pushType:priority:)``;
    /// - `Topic`: ``topic(for:)`` of `key`.
    public init(expiration: Expiration, pushType: PushType, priority: Priority, collapseID: CollapseID?, sentAt: Date) {
        switch expiration {
        case .storagePolicy:
            ttl = Self.maximumTTLSeconds
        case .immediately:
            ttl = 0
        case .at(let epochSeconds):
            let left = epochSeconds - Int64(sentAt.timeIntervalSince1970.rounded(.down))
            ttl = min(max(left, 0), Self.maximumTTLSeconds)
        }
        urgency = WebPushUrgency(pushType: pushType, priority: priority)
        topic = collapseID.map { Self.topic(for: $0) }
    }

    /// The headers of a stored request, sent at `sentAt`.
    public init(request: NotificationRequest, sentAt: Date) {
        self.init(
            expiration: request.expiration,
            pushType: request.pushType,
            priority: request.priority,
            collapseID: request.collapseID,
            sentAt: sentAt
        )
    }

    /// The `Topic` for a request's `key`: the key itself when it already is 1 to 32 base64url
    /// characters; otherwise the first 32 characters of base64url(SHA-256(key)). Never refused: a key
    /// valid for APNs (up to 64 bytes, any printable text) always yields a topic, and equal keys always
    /// yield equal topics, so a newer message still replaces an older one with the same key.
    public static func topic(for key: CollapseID) -> String {
        let value = key.value
        if value.utf8.count <= maximumTopicLength, Base64URL.isAlphabet(value) { return value }
        return String(Base64URL.encode(Array(SHA256.hash(data: Array(value.utf8)))).prefix(maximumTopicLength))
    }

    /// Every header of the message, names lower-case (HTTP/2), `authorization` excluded.
    public var fields: [(name: String, value: String)] {
        var fields: [(name: String, value: String)] = [
            ("ttl", String(ttl)),
            ("urgency", urgency.rawValue),
            ("content-encoding", "aes128gcm"),
            ("content-type", "application/octet-stream"),
        ]
        if let topic { fields.append(("topic", topic)) }
        return fields
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.ttl == rhs.ttl && lhs.urgency == rhs.urgency && lhs.topic == rhs.topic
    }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(ttl)
        hasher.combine(urgency)
        hasher.combine(topic)
    }
}
