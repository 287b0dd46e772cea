import Foundation

/// What a browser receives for one notification request: the plaintext that the WebPush module
/// encrypts, once per subscription.
///
/// By default the request's payload exactly as the sender wrote it (the page's service worker parses it
/// and decides what to show; strings stay strings). With a `webpush` override, the payload patched by it
/// (RFC 7396), written with sorted keys. At most ``maximumBytes`` (3,993); more is refused naming the
/// largest member (`payload.X`, or `webpush.X` when the override set it).
///
/// It lives here rather than in the WebPush module (which holds the encryption, VAPID and subscriptions)
/// for the same reason as `FCMMessage`: the request schema must refuse a message browsers cannot get
/// before anything is stored, and the schema is here.
public struct WebPushMessage: Hashable, Sendable {
    /// 4,096 bytes a push service must accept (RFC 8030 §7.2), less `aes128gcm`'s 86-byte header, the
    /// padding delimiter and the 16-byte tag (RFC 8291 §4).
    public static let maximumBytes = 3993

    public let plaintext: [UInt8]

    public init(payload: Payload, override: WebPushOverride? = nil) throws(ValidationError) {
        guard let override else {
            plaintext = payload.bytes
            try Self.checkSize(plaintext, object: nil, patch: [:])
            return
        }
        guard let base = FCMJSON.object(payload.bytes) else {
            throw ValidationError(code: .invalidPayload, field: "payload", message: "payload must be a JSON object")
        }
        let patch = FCMJSON.object(override.bytes) ?? [:]
        let merged = FCMJSON.mergePatch(base, patch) as? [String: Any] ?? [:]
        plaintext = FCMJSON.encode(merged)
        try Self.checkSize(plaintext, object: merged, patch: patch)
    }

    /// The message of a stored request, with `override` (its `webpush` object, ``NotificationRequest/webPush``;
    /// nil: none).
    public init(request: NotificationRequest, override: WebPushOverride? = nil) throws(ValidationError) {
        try self.init(payload: request.payload, override: override)
    }

    private static func checkSize(
        _ plaintext: [UInt8],
        object: [String: Any]?,
        patch: [String: Any]
    )
        throws(ValidationError)
    {
        guard plaintext.count > maximumBytes else { return }
        var field = "payload"
        if let members = object ?? FCMJSON.object(plaintext),
            let largest = members.max(by: { (size($0.value), $1.key) < (size($1.value), $0.key) })?.key
        {
            field = patch[largest] != nil ? "webpush.\(largest)" : "payload.\(largest)"
        }
        throw ValidationError(
            code: .payloadTooLarge,
            field: field,
            message:
                "the Web Push message is \(plaintext.count) bytes; at most \(maximumBytes) fit in the 4096 bytes"
                + " a push service accepts encrypted (largest: \(field))"
        )
    }

    private static func size(_ value: Any) -> Int { FCMJSON.encode(value).count }
}
