import Foundation
import PushgateCore

/// The body of `POST /v1/notifications`: the UDP notification request (`groups`, `type`, `expiration`,
/// `key`, `payload`) with its extension keys (`devices`, `app`, `push_type`, `priority`), read with the
/// same rules as the UDP ingress (`NotificationDatagram` in PushgateUDP, which this target does not
/// depend on): `type` background → background/5, normal → alert/5, urgent → alert/10, overridden by
/// `push_type` and `priority`; no group and no device is an error; the payload must be an object within
/// the push type's limit.
///
/// Pure: the request id and the time are passed in. Checks run in a fixed order (JSON, root object,
/// unknown fields, then app, groups, devices, type, push_type, priority, expiration, key, payload, then
/// the rules between fields), so the error reported for a body with several problems is stable.
enum NotificationBody {
    static let allowedFields: Set<String> = [
        "groups", "type", "expiration", "key", "payload", "devices", "app", "push_type", "priority",
    ]

    static func parse(_ bytes: [UInt8], apps: AppNames, id: RequestID, receivedAt: Date) throws(APIError)
        -> NotificationRequest
    {
        guard case .object(let object) = try JSONValue.parse(bytes) else {
            throw APIError(.badRequest, .notAnObject, field: "body", message: "the body must be a JSON object")
        }
        if let unknown = object.keys.filter({ !allowedFields.contains($0) }).min() {
            throw APIError(
                .badRequest, .unknownField, field: String(unknown.prefix(64)),
                message:
                    "unknown field \"\(unknown.prefix(64))\"; expected one of \(allowedFields.sorted().joined(separator: ", "))"
            )
        }
        let fields = Fields(object: object)

        let app: String
        if let named = try fields.string("app") {
            guard apps.contains(named) else { throw APIError.unknownApp(named) }
            app = named
        } else if let implicit = apps.implicit {
            app = implicit
        } else {
            throw APIError.missing("app")
        }

        var groups: [String] = []
        if let names = try fields.stringArray("groups") {
            var seen = Set<String>()
            for name in names {
                try Names.validateGroup(name, field: "groups")
                if seen.insert(name).inserted { groups.append(name) }
            }
        }

        var devices: [DeviceToken] = []
        if let tokens = try fields.stringArray("devices") {
            var seen = Set<DeviceToken>()
            for hex in tokens {
                let token = try validated { () throws(ValidationError) in try DeviceToken(hex: hex, field: "devices") }
                if seen.insert(token).inserted { devices.append(token) }
            }
        }

        let type: PushdType
        if let raw = try fields.string("type") {
            guard let known = PushdType(rawValue: raw) else {
                throw APIError(
                    .badRequest, .unknownType, field: "type",
                    message: "unknown type \"\(raw.prefix(32))\"; expected background, normal or urgent")
            }
            type = known
        } else {
            type = .background
        }

        let pushType = try fields.string("push_type").map { raw throws(APIError) in
            try validated { () throws(ValidationError) in try PushType(validating: raw, field: "push_type") }
        } ?? type.pushType

        let explicitPriority = try fields.integer("priority").map { raw throws(APIError) in
            try validated { () throws(ValidationError) in
                try Priority(validating: Int(exactly: raw) ?? -1, field: "priority")
            }
        }

        let expirationSeconds = try fields.integer("expiration") ?? 0
        let expiration = try validated { () throws(ValidationError) in
            try Expiration(validating: expirationSeconds, field: "expiration")
        }

        let collapseID = try fields.string("key").map { raw throws(APIError) in
            try validated { () throws(ValidationError) in try CollapseID(raw, field: "key") }
        }

        guard let payloadValue = object["payload"] else { throw APIError.missing("payload") }
        guard case .object = payloadValue else {
            throw APIError.wrongType("payload", expected: "an object", got: payloadValue)
        }

        guard !groups.isEmpty || !devices.isEmpty else {
            throw APIError(
                .badRequest, .noTargets, field: "groups", message: "a notification needs at least one group or device")
        }

        let priority = explicitPriority ?? type.priority
        guard pushType.allows(priority) else {
            throw APIError(
                ValidationError(
                    code: .invalidPriority, field: explicitPriority == nil ? "type" : "priority",
                    message: "\(pushType) notifications must use priority 5 (got \(priority.rawValue))"))
        }

        let payload = try validated { () throws(ValidationError) in
            let payload = try Payload(jsonBytes: payloadValue.serialized(), field: "payload")
            try payload.validate(for: pushType, field: "payload")
            return payload
        }

        return NotificationRequest(
            id: id, app: app, groups: groups, devices: devices, pushType: pushType, priority: priority,
            expiration: expiration, collapseID: collapseID, payload: payload, createdAt: receivedAt)
    }

    /// The C pushd's `type`.
    enum PushdType: String {
        case background, normal, urgent

        var pushType: PushType { self == .background ? .background : .alert }
        var priority: Priority { self == .urgent ? .immediate : .conservePower }
    }

    /// Typed access to the body's fields; a field present with the wrong JSON type (null included) is
    /// `wrong_type`.
    struct Fields {
        let object: [String: JSONValue]

        func string(_ key: String) throws(APIError) -> String? {
            guard let value = object[key] else { return nil }
            guard case .string(let string) = value else { throw APIError.wrongType(key, expected: "a string", got: value) }
            return string
        }

        func integer(_ key: String) throws(APIError) -> Int64? {
            guard let value = object[key] else { return nil }
            guard case .integer(let integer) = value else {
                throw APIError.wrongType(key, expected: "an integer", got: value)
            }
            return integer
        }

        func stringArray(_ key: String) throws(APIError) -> [String]? {
            guard let value = object[key] else { return nil }
            guard case .array(let elements) = value else {
                throw APIError.wrongType(key, expected: "an array of strings", got: value)
            }
            var strings: [String] = []
            strings.reserveCapacity(elements.count)
            for (position, element) in elements.enumerated() {
                guard case .string(let string) = element else {
                    throw APIError(
                        .badRequest, .wrongType, field: key,
                        message: "\(key)[\(position)] must be a string, got \(element.kindName)")
                }
                strings.append(string)
            }
            return strings
        }
    }
}

/// Runs a core validation, answering its `ValidationError` as a 400 `APIError`.
func validated<T>(_ body: () throws(ValidationError) -> T) throws(APIError) -> T {
    do { return try body() } catch { throw APIError(error) }
}

/// The rules for group and app names, as the UDP ingress has them: 1 to 255 bytes of UTF-8, no control
/// characters (C0, DEL, C1).
enum Names {
    static let maximumByteCount = 255

    static func validateGroup(_ name: String, field: String = "group") throws(APIError) {
        guard !name.isEmpty else {
            throw APIError(.badRequest, .invalidGroup, field: field, message: "group name must not be empty")
        }
        guard name.utf8.count <= maximumByteCount else {
            throw APIError(
                .badRequest, .invalidGroup, field: field,
                message: "group name must be at most \(maximumByteCount) bytes (got \(name.utf8.count))")
        }
        for scalar in name.unicodeScalars where scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) {
            throw APIError(
                .badRequest, .invalidGroup, field: field, message: "group name must not contain control characters")
        }
    }
}
