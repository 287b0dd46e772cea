package import Foundation

/// The C pushd's `type` of a notification request, and what it means for APNs.
public enum PushdNotificationType: String, CaseIterable, Hashable, Sendable {
    case background
    case normal
    case urgent

    /// As the C pushd sends it: background → `background`, normal and urgent → `alert`.
    public var pushType: PushType {
        switch self {
        case .background: .background
        case .normal, .urgent: .alert
        }
    }

    /// As the C pushd sends it: only urgent is 10.
    public var priority: Priority {
        switch self {
        case .background, .normal: .conservePower
        case .urgent: .immediate
        }
    }
}

/// A notification request, as every ingress reads it (the UDP notification port, `POST /v1/notifications`):
/// `{"groups": [..], "type": "background"|"normal"|"urgent", "expiration": <unix s>, "key": "<collapse id>",
/// "payload": {...}}`, as the C pushd reads it, plus the optional extension keys `"devices"` (APNs tokens
/// to target directly), `"fcm_devices"` (FCM registration tokens to target directly), `"app"`,
/// `"push_type"` (overrides the push type `type` implies), `"priority"` (1, 5 or 10; overrides the
/// priority `type` implies), `"fcm"` (an object overriding the FCM message derived for FCM devices,
/// ``FCMOverride``) and `"webpush"` (a JSON merge patch over the payload for browsers, ``WebPushOverride``).
///
/// A request that speaks FCM (it has an `fcm` object or names `fcm_devices`) has its FCM message derived
/// here, once, so that one FCM cannot send (too large, `fcm` breaking the message's rules) is refused
/// before anything is stored, whether or not the app has FCM devices yet. A request that does not (what
/// a pushd client sends) is not: its APNs limits are the C pushd's, and the derived message of a payload
/// near them can be larger than FCM's 4,096 bytes (docs/fcm.md, "Size"). Likewise a request with a
/// `webpush` object has its Web Push message built here and refused when it exceeds 3,993 bytes
/// (``WebPushMessage``, naming the field); one without is not refused for a browser's limit (an APNs
/// payload may be 4,096 bytes): its browsers fail at dispatch instead (docs/webpush.md).
///
/// The payload is kept as the bytes the sender wrote (from its `{` to its `}`), never re-serialised.
/// Pure: the request id and the receive time are passed in. Any problem rejects the whole request with
/// a `ValidationError` naming the field, worded by the ingress's ``RequestDialect``.
///
/// A new field is added here: its key in ``allowedKeys`` and its reading in ``read(_:dialect:id:receivedAt:app:)``.
package enum NotificationRequestSchema {
    package static let allowedKeys: Set<String> = [
        "groups", "type", "expiration", "key", "payload", "devices", "app", "push_type", "priority",
        "fcm_devices", "fcm", "webpush",
    ]

    /// Decides the request's app from its `app` member (nil when absent); the ingress's rule (a default
    /// app on UDP, the served apps over HTTP). Throws to refuse the request.
    package typealias AppRule = (String?) throws(ValidationError) -> String

    /// Field checks run in a fixed order (after the JSON and key checks of ``RequestDocument``), so the
    /// reason reported for a request with several problems is stable: app, groups, devices, fcm_devices,
    /// type, push_type, priority, expiration, key, payload, fcm, webpush, then the rules between fields
    /// (targets, priority allowed for the push type, payload size for the push type, the FCM message, the
    /// Web Push message).
    package static func read(
        _ bytes: UnsafeRawBufferPointer,
        dialect: RequestDialect,
        id: RequestID,
        receivedAt: Date,
        app rule: AppRule
    ) throws(ValidationError) -> NotificationRequest {
        let document = try RequestDocument(parsing: bytes, allowedKeys: allowedKeys, dialect: dialect)
        let app = try rule(try document.string("app"))
        let groups = try uniqueGroups(document.stringArray("groups") ?? [])
        let devices = try uniqueDevices([
            (.apns, "devices", try document.stringArray("devices") ?? []),
            (.fcm, "fcm_devices", try document.stringArray("fcm_devices") ?? []),
        ])
        let type = try pushdType(document.string("type"))
        let pushType =
            try document.string("push_type").map { raw throws(ValidationError) in
                try PushType(validating: raw, field: "push_type")
            } ?? type.pushType
        let explicitPriority = try document.integer("priority").map { raw throws(ValidationError) in
            try Priority(validating: Int(exactly: raw) ?? -1, field: "priority")
        }
        let expiration = try Expiration(validating: try document.integer("expiration") ?? 0, field: "expiration")
        let collapseID = try document.string("key").map { raw throws(ValidationError) in
            try CollapseID(raw, field: "key")
        }
        guard let payloadBytes = try document.objectBytes("payload", in: bytes) else {
            throw RequestDocument.missing("payload")
        }
        let fcm = try document.objectBytes("fcm", in: bytes).map { raw throws(ValidationError) in
            try FCMOverride(jsonBytes: raw, field: "fcm")
        }
        let webPush = try document.objectBytes("webpush", in: bytes).map { raw throws(ValidationError) in
            try WebPushOverride(jsonBytes: raw, field: "webpush")
        }

        guard !groups.isEmpty || !devices.isEmpty else {
            throw ValidationError(
                code: .noTargets,
                field: "groups",
                message: "a notification needs at least one group or device (devices, fcm_devices)"
            )
        }
        let priority = explicitPriority ?? type.priority
        guard pushType.allows(priority) else {
            throw ValidationError(
                code: .invalidPriority,
                field: explicitPriority == nil ? "type" : "priority",
                message: "\(pushType) notifications must use priority 5 (got \(priority.rawValue))"
            )
        }
        let payload = try Payload(parsedObject: payloadBytes, field: "payload")
        try payload.validate(for: pushType, field: "payload")

        let request = NotificationRequest(
            id: id,
            app: app,
            groups: groups,
            devices: devices,
            pushType: pushType,
            priority: priority,
            expiration: expiration,
            collapseID: collapseID,
            payload: payload,
            fcm: fcm,
            webPush: webPush,
            createdAt: receivedAt
        )
        if fcm != nil || devices.contains(where: { $0.platform == .fcm }) {
            _ = try FCMMessage(request: request)
        }
        if webPush != nil { _ = try WebPushMessage(request: request, override: webPush) }
        return request
    }

    private static func uniqueGroups(_ names: [String]) throws(ValidationError) -> [String] {
        var seen = Set<String>()
        var groups: [String] = []
        for name in names {
            try RequestNames.validateGroup(name, field: "groups")
            if seen.insert(name).inserted { groups.append(name) }
        }
        return groups
    }

    /// The tokens of each list (`devices` for APNs, `fcm_devices` for FCM), validated for its platform,
    /// duplicates dropped, in the lists' order.
    private static func uniqueDevices(
        _ lists: [(platform: PushPlatform, key: String, tokens: [String])]
    ) throws(ValidationError) -> [DeviceToken] {
        var seen = Set<DeviceToken>()
        var devices: [DeviceToken] = []
        for (platform, key, tokens) in lists {
            for value in tokens {
                let token = try DeviceToken(platform: platform, value: value, field: key)
                if seen.insert(token).inserted { devices.append(token) }
            }
        }
        return devices
    }

    private static func pushdType(_ raw: String?) throws(ValidationError) -> PushdNotificationType {
        guard let raw else { return .background }
        guard let known = PushdNotificationType(rawValue: raw) else {
            throw ValidationError(
                code: .unknownType,
                field: "type",
                message: "unknown type \"\(StrictJSONParser.quoteShort(raw))\"; expected background, normal or urgent"
            )
        }
        return known
    }
}
