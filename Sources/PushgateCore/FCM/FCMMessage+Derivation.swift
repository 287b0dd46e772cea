public import Foundation

extension FCMMessage {
    /// Derives the FCM message of a notification request, by the rules of `docs/fcm.md`:
    ///
    /// - `aps.alert` (a string, or an object with `title` and/or `body`) becomes `notification`;
    /// - every top-level key other than `aps` becomes a `data` entry: a string as it is (`"s":"x"` →
    ///   `"s":"x"`), any other value as its JSON text (`"n":1` → `"n":"1"`, `"o":{"a":1}` → `"o":"{\"a\":1}"`);
    /// - `background` notifications are data-only (no `notification`) with `android.priority` NORMAL;
    ///   priority 10 becomes HIGH, anything else NORMAL;
    /// - `expiration` becomes `android.ttl` (`immediately` → `0s`, a time → the seconds left after
    ///   `createdAt`, the time the message is sent, floored at 0 and at most 28 days; the storage
    ///   policy leaves it to FCM);
    /// - the collapse id (pushd's `key`) becomes `android.collapse_key`;
    /// - `override` is then merged in (RFC 7396).
    ///
    /// A message over ``maximumBytes`` is refused with the biggest field named.
    public init(
        payload: Payload,
        pushType: PushType,
        priority: Priority,
        expiration: Expiration,
        collapseID: CollapseID?,
        createdAt: Date,
        override: FCMOverride? = nil
    ) throws(ValidationError) {
        guard let body = FCMJSON.object(payload.bytes) else {
            throw ValidationError(code: .invalidPayload, field: "payload", message: "payload must be a JSON object")
        }
        var message: [String: Any] = [:]
        if pushType != .background, let notification = Self.notification(from: body["aps"]) {
            message["notification"] = notification
        }
        var data: [String: Any] = [:]
        // FCM's `data` maps strings to strings: a string needs no encoding (an Android app reads
        // `data["team"]` as `Lyon`, not `"Lyon"`); numbers, booleans, objects and arrays become JSON text.
        for (key, value) in body where key != "aps" { data[key] = (value as? String) ?? FCMJSON.text(value) }
        if !data.isEmpty { message["data"] = data }
        var android: [String: Any] = [
            "priority": pushType != .background && priority == .immediate ? "HIGH" : "NORMAL"
        ]
        if let ttl = Self.ttl(expiration, createdAt: createdAt) { android["ttl"] = ttl }
        if let collapseID { android["collapse_key"] = collapseID.value }
        message["android"] = android

        var patch: [String: Any] = [:]
        if let override, let object = FCMJSON.object(override.bytes) {
            patch = object
            message = FCMJSON.mergePatch(message, patch) as? [String: Any] ?? [:]
        }
        try Self.validate(message)
        let encoded = FCMJSON.encode(message)
        self.init(members: Array(encoded.dropFirst().dropLast()))
        guard byteCount <= Self.maximumBytes else {
            let field = Self.largestField(of: message, patch: patch)
            throw ValidationError(
                code: .payloadTooLarge,
                field: field,
                message:
                    "the FCM message is \(byteCount) bytes; FCM accepts at most \(Self.maximumBytes)"
                    + " (largest: \(field))"
            )
        }
    }

    /// The message of a stored request: derived, then patched by `override` (by default the request's own).
    /// `sentAt` is when it goes out (default: when the request was made): a retry sent later carries the
    /// TTL that is left then, not the one it started with.
    public init(
        request: NotificationRequest,
        override: FCMOverride?? = nil,
        sentAt: Date? = nil
    ) throws(ValidationError) {
        try self.init(
            payload: request.payload,
            pushType: request.pushType,
            priority: request.priority,
            expiration: request.expiration,
            collapseID: request.collapseID,
            createdAt: sentAt ?? request.createdAt,
            override: override ?? request.fcm
        )
    }

    private static func notification(from aps: Any?) -> [String: String]? {
        guard let alert = (aps as? [String: Any])?["alert"] else { return nil }
        if let text = alert as? String { return text.isEmpty ? nil : ["body": text] }
        guard let object = alert as? [String: Any] else { return nil }
        var notification: [String: String] = [:]
        for key in ["title", "body"] { if let text = object[key] as? String { notification[key] = text } }
        return notification.isEmpty ? nil : notification
    }

    private static func ttl(_ expiration: Expiration, createdAt: Date) -> String? {
        switch expiration {
        case .storagePolicy:
            return nil
        case .immediately:
            return "0s"
        case .at(let epochSeconds):
            let left = epochSeconds - Int64(createdAt.timeIntervalSince1970.rounded(.down))
            return "\(min(max(left, 0), maximumTTLSeconds))s"
        }
    }

    /// What the merge may have broken: `data` must map strings to strings, `notification` and
    /// `android` must be objects.
    private static func validate(_ message: [String: Any]) throws(ValidationError) {
        for key in ["notification", "android", "data", "apns", "webpush", "fcm_options"] {
            if let value = message[key], !(value is [String: Any]) {
                throw ValidationError(
                    code: .invalidFCMMessage,
                    field: "fcm.\(key)",
                    message: "\(key) must be an object"
                )
            }
        }
        for (key, value) in message["data"] as? [String: Any] ?? [:] where !(value is String) {
            throw ValidationError(
                code: .invalidFCMMessage,
                field: "fcm.data.\(key)",
                message: "data values must be strings"
            )
        }
    }

    /// The user-facing name of the biggest part of an oversized message: `fcm.X` when the override
    /// set it, else the request field it was derived from.
    private static func largestField(of message: [String: Any], patch: [String: Any]) -> String {
        var parts: [(path: String, size: Int)] = []
        for (key, value) in message {
            if key == "data", let data = value as? [String: Any] {
                for (name, text) in data {
                    parts.append(("data.\(name)", FCMJSON.encode(text).count + name.utf8.count))
                }
            } else {
                parts.append((key, FCMJSON.encode(value).count))
            }
        }
        guard let largest = parts.max(by: { ($0.size, $1.path) < ($1.size, $0.path) })?.path else { return "payload" }
        let patchData = patch["data"] as? [String: Any] ?? [:]
        if patch[largest] != nil { return "fcm.\(largest)" }
        if largest.hasPrefix("data.") {
            let name = String(largest.dropFirst("data.".count))
            return patchData[name] != nil ? "fcm.\(largest)" : "payload.\(name)"
        }
        return largest == "notification" ? "payload.aps.alert" : "payload"
    }
}

/// The little JSON handling FCM derivation needs, on Foundation's parser: keys sorted on output so the
/// same request always encodes to the same bytes.
enum FCMJSON {
    static func object(_ bytes: [UInt8]) -> [String: Any]? {
        try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
    }

    static func encode(_ value: Any) -> [UInt8] {
        let options: JSONSerialization.WritingOptions = [.fragmentsAllowed, .sortedKeys, .withoutEscapingSlashes]
        return (try? JSONSerialization.data(withJSONObject: value, options: options)).map(Array.init) ?? []
    }

    /// The JSON text of a value, as a Swift string.
    static func text(_ value: Any) -> String { String(decoding: encode(value), as: UTF8.self) }

    /// RFC 7396: objects merge key by key, `null` removes, anything else replaces.
    static func mergePatch(_ target: Any?, _ patch: Any) -> Any? {
        guard let patch = patch as? [String: Any] else { return patch }
        var result = target as? [String: Any] ?? [:]
        for (key, value) in patch {
            if value is NSNull {
                result[key] = nil
            } else {
                result[key] = mergePatch(result[key], value)
            }
        }
        return result
    }
}
