package import Foundation

/// A registration, as every ingress reads it: `{"device": "<hex token>", "group": "<name>"}` as the C
/// pushd reads it, plus the optional extension keys `"app"` (a string; default
/// ``Registration/defaultApp``), `"platform"` (`"apns"`, the default, or `"fcm"`: the service the device
/// is reached through, which decides how `device` is validated) and `"remove"` (a boolean; `true` takes
/// the device out of the group).
///
/// Pure: the receive time is passed in. A new field is added here: its key in ``allowedKeys`` and its
/// reading in ``read(_:dialect:receivedAt:)``.
package enum RegistrationSchema {
    package static let allowedKeys: Set<String> = ["device", "group", "app", "platform", "remove"]

    /// What a registration asks for: the membership, and whether to remove it instead of adding it.
    package struct Fields: Hashable, Sendable {
        package var registration: Registration
        package var remove: Bool
    }

    /// Checks in a fixed order after the JSON and key checks: app, platform, device, group, remove.
    package static func read(
        _ bytes: UnsafeRawBufferPointer,
        dialect: RequestDialect,
        receivedAt: Date
    ) throws(ValidationError) -> Fields {
        let document = try RequestDocument(parsing: bytes, allowedKeys: allowedKeys, dialect: dialect)
        let app = try document.string("app") ?? Registration.defaultApp
        try RequestNames.validateApp(app)
        let platform = try PushPlatform(requestValue: try document.string("platform"))
        let token = try DeviceToken(platform: platform, value: try document.requiredString("device"), field: "device")
        let group = try document.requiredString("group")
        try RequestNames.validateGroup(group)
        let remove = try document.bool("remove") ?? false
        return Fields(registration: Registration(app: app, token: token, group: group, at: receivedAt), remove: remove)
    }
}
