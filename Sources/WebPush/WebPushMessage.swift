import Foundation
public import PushgateCore

/// What a browser receives for one notification request: the plaintext that is encrypted, once per
/// subscription, by ``WebPushEncryption``.
///
/// By default the request's payload exactly as the sender wrote it (the page's service worker parses it
/// and decides what to show; strings stay strings). With a `webpush` override, the payload patched by it
/// (RFC 7396), written with sorted keys. At most ``WebPushEncryption/maximumPlaintextBytes`` (3,993)
/// bytes; more is refused naming the largest member (`payload.X`, or `webpush.X` when the override set it).
public struct WebPushMessage: Hashable, Sendable {
    public let plaintext: [UInt8]

    public init(payload: Payload, override: WebPushOverride? = nil) throws(ValidationError) {
        guard let override else {
            plaintext = payload.bytes
            try Self.checkSize(plaintext, object: nil, patch: [:])
            return
        }
        let options: JSONSerialization.ReadingOptions = []
        guard
            let base = (try? JSONSerialization.jsonObject(with: Data(payload.bytes), options: options))
                as? [String: Any]
        else {
            throw ValidationError(code: .invalidPayload, field: "payload", message: "payload must be a JSON object")
        }
        let patch = (try? JSONSerialization.jsonObject(with: Data(override.bytes))) as? [String: Any] ?? [:]
        let merged = Self.mergePatch(base, patch) as? [String: Any] ?? [:]
        plaintext = Self.encode(merged)
        try Self.checkSize(plaintext, object: merged, patch: patch)
    }

    /// The message of a stored request, with `override` (nil: none; the request schema does not carry a
    /// `webpush` object yet, see docs/webpush.md).
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
        guard plaintext.count > WebPushEncryption.maximumPlaintextBytes else { return }
        var field = "payload"
        if let object,
            let largest = object.max(by: { (encode($0.value).count, $1.key) < (encode($1.value).count, $0.key) })?.key
        {
            field = patch[largest] != nil ? "webpush.\(largest)" : "payload.\(largest)"
        } else if object == nil,
            let base = (try? JSONSerialization.jsonObject(with: Data(plaintext))) as? [String: Any],
            let largest = base.max(by: { (encode($0.value).count, $1.key) < (encode($1.value).count, $0.key) })?.key
        {
            field = "payload.\(largest)"
        }
        throw ValidationError(
            code: .payloadTooLarge,
            field: field,
            message:
                "the Web Push message is \(plaintext.count) bytes; at most"
                + " \(WebPushEncryption.maximumPlaintextBytes) fit in the 4096 bytes a push service accepts"
                + " encrypted (largest: \(field))"
        )
    }

    private static func encode(_ value: Any) -> [UInt8] {
        let options: JSONSerialization.WritingOptions = [.fragmentsAllowed, .sortedKeys, .withoutEscapingSlashes]
        return (try? JSONSerialization.data(withJSONObject: value, options: options)).map(Array.init) ?? []
    }

    /// RFC 7396: objects merge key by key, `null` removes, anything else replaces.
    private static func mergePatch(_ target: Any?, _ patch: Any) -> Any? {
        guard let patch = patch as? [String: Any] else { return patch }
        var result = target as? [String: Any] ?? [:]
        for (key, value) in patch {
            result[key] = value is NSNull ? nil : mergePatch(result[key], value)
        }
        return result
    }
}

extension ValidationError.Code {
    public static let invalidWebPushMessage = ValidationError.Code("invalid_webpush_message")
}
