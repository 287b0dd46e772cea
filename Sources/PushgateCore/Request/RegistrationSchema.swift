package import Foundation

/// A registration, as every ingress reads it: `{"device": "<hex token>", "group": "<name>"}` as the C
/// pushd reads it, plus the optional extension keys `"app"` (a string; default
/// ``Registration/defaultApp``), `"platform"` (`"apns"`, the default, `"fcm"` or `"webpush"`: the service
/// the device is reached through, which decides how `device` is validated), `"subscription"` (a browser's
/// `PushSubscription` JSON, which a `"webpush"` registration gives instead of `device`) and `"remove"` (a
/// boolean; `true` takes the device out of the group).
///
/// Pure: the receive time is passed in. A new field is added here: its key in ``allowedKeys`` and its
/// reading in ``read(_:dialect:receivedAt:)``.
package enum RegistrationSchema {
    package static let allowedKeys: Set<String> = ["device", "group", "app", "platform", "remove", "subscription"]

    /// What a registration asks for: the membership, and whether to remove it instead of adding it.
    package struct Fields: Hashable, Sendable {
        package var registration: Registration
        package var remove: Bool
    }

    /// Checks in a fixed order after the JSON and key checks: app, platform, device (or subscription),
    /// group, remove.
    package static func read(
        _ bytes: UnsafeRawBufferPointer,
        dialect: RequestDialect,
        receivedAt: Date
    ) throws(ValidationError) -> Fields {
        let document = try RequestDocument(parsing: bytes, allowedKeys: allowedKeys, dialect: dialect)
        let app = try document.string("app") ?? Registration.defaultApp
        try RequestNames.validateApp(app)
        let platform = try PushPlatform(requestValue: try document.string("platform"))
        let token = try device(of: platform, in: document, bytes: bytes)
        let group = try document.requiredString("group")
        try RequestNames.validateGroup(group)
        let remove = try document.bool("remove") ?? false
        return Fields(registration: Registration(app: app, token: token, group: group, at: receivedAt), remove: remove)
    }

    /// The body of the HTTP API's `PUT …/devices/{endpoint}?platform=webpush`: `{"subscription": {…}}`,
    /// the browser's `PushSubscription` JSON, read as a registration's `subscription` member is. Its
    /// `endpoint` must be the one the path names (`subscription.endpoint` otherwise). No body at all is a
    /// missing `subscription`.
    package static func readSubscriptionBody(
        _ bytes: UnsafeRawBufferPointer,
        dialect: RequestDialect,
        endpoint: Substring
    ) throws(ValidationError) -> DeviceToken {
        guard !bytes.isEmpty else { throw RequestDocument.missing("subscription") }
        let document = try RequestDocument(parsing: bytes, allowedKeys: ["subscription"], dialect: dialect)
        guard let member = try document.objectBytes("subscription", in: bytes) else {
            throw RequestDocument.missing("subscription")
        }
        let subscription = try WebPushSubscription(jsonBytes: member, field: "subscription")
        guard subscription.endpoint[...] == endpoint else {
            throw ValidationError(
                code: .invalidSubscription,
                field: "subscription.endpoint",
                message: "endpoint is not the one the path names"
            )
        }
        return subscription.deviceToken
    }

    /// `device` for a phone; for a browser (`webpush`) its `subscription` object
    /// (`WebPushSubscription(jsonObject:)`: endpoint, keys on the curve, errors naming
    /// `subscription.FIELD`), and no `device`.
    private static func device(
        of platform: PushPlatform,
        in document: RequestDocument,
        bytes: UnsafeRawBufferPointer
    ) throws(ValidationError) -> DeviceToken {
        guard platform == .webpush else {
            if document.value("subscription") != nil {
                throw ValidationError(
                    code: .invalidSubscription,
                    field: "subscription",
                    message: "only a webpush registration has a subscription (platform is \(platform))"
                )
            }
            return try DeviceToken(platform: platform, value: try document.requiredString("device"), field: "device")
        }
        if document.value("device") != nil {
            throw ValidationError(
                code: .invalidToken,
                field: "device",
                message: "a webpush registration names the browser by its subscription, not by device"
            )
        }
        guard let subscription = try document.objectBytes("subscription", in: bytes) else {
            throw RequestDocument.missing("subscription")
        }
        return DeviceToken(webPush: try WebPushSubscription(jsonBytes: subscription, field: "subscription"))
    }
}
