public import Foundation
public import NIOCore
public import PushgateCore

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

/// The notification datagram (port 7874):
/// `{"groups": [..], "type": "background"|"normal"|"urgent", "expiration": <unix s>, "key": "<collapse id>",
/// "payload": {...}}`, as the C pushd reads it, plus the optional extension keys `"devices"` (tokens to
/// target directly), `"app"`, `"push_type"` (overrides the push type `type` implies) and `"priority"`
/// (1, 5 or 10; overrides the priority `type` implies).
///
/// The payload is kept as the bytes the sender wrote (from its `{` to its `}`), never re-serialised.
/// Pure: the request id and the receive time are passed in. Any problem rejects the whole datagram with
/// a `ValidationError` naming the field; see `docs/udp.md` for the codes.
public enum NotificationDatagram {
    public static let allowedKeys: Set<String> = [
        "groups", "type", "expiration", "key", "payload", "devices", "app", "push_type", "priority",
    ]

    public static func parse(
        _ bytes: [UInt8],
        id: RequestID,
        receivedAt: Date
    ) throws(ValidationError)
        -> NotificationRequest
    {
        try bytes.withDatagramBytes { raw throws(ValidationError) in try parse(raw, id: id, receivedAt: receivedAt) }
    }

    public static func parse(
        _ buffer: ByteBuffer,
        id: RequestID,
        receivedAt: Date
    ) throws(ValidationError)
        -> NotificationRequest
    {
        let result: Result<NotificationRequest, ValidationError> = buffer.withUnsafeReadableBytes { raw in
            do throws(ValidationError) { return .success(try parse(raw, id: id, receivedAt: receivedAt)) } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Field checks run in a fixed order (after the JSON and key checks of ``DatagramObject``), so the
    /// reason reported for a datagram with several problems is stable: app, groups, devices, type,
    /// push_type, priority, expiration, key, payload, then the rules between fields (targets, priority
    /// allowed for the push type, payload size for the push type).
    static func parse(
        _ bytes: UnsafeRawBufferPointer,
        id: RequestID,
        receivedAt: Date
    ) throws(ValidationError)
        -> NotificationRequest
    {
        let object = try DatagramObject(parsing: bytes, allowedKeys: allowedKeys)

        let app = try object.string("app") ?? Registration.defaultApp
        try DatagramNames.validateApp(app)

        var groups: [String] = []
        if let names = try object.stringArray("groups") {
            var seen = Set<String>()
            for name in names {
                try DatagramNames.validateGroup(name, field: "groups")
                if seen.insert(name).inserted { groups.append(name) }
            }
        }

        var devices: [DeviceToken] = []
        if let tokens = try object.stringArray("devices") {
            var seen = Set<DeviceToken>()
            for hex in tokens {
                let token = try DeviceToken(hex: hex, field: "devices")
                if seen.insert(token).inserted { devices.append(token) }
            }
        }

        let type: PushdNotificationType
        if let raw = try object.string("type") {
            guard let known = PushdNotificationType(rawValue: raw) else {
                throw ValidationError(
                    code: .unknownType,
                    field: "type",
                    message:
                        "unknown type \"\(StrictJSONParser.quoteShort(raw))\"; expected background, normal or urgent"
                )
            }
            type = known
        } else {
            type = .background
        }

        let pushType =
            try object.string("push_type").map { raw throws(ValidationError) in
                try PushType(validating: raw, field: "push_type")
            } ?? type.pushType

        let explicitPriority = try object.integer("priority").map { raw throws(ValidationError) in
            guard let small = Int(exactly: raw) else { return try Priority(validating: -1, field: "priority") }
            return try Priority(validating: small, field: "priority")
        }

        let expiration = try Expiration(validating: try object.integer("expiration") ?? 0, field: "expiration")

        let collapseID = try object.string("key").map { raw throws(ValidationError) in
            try CollapseID(raw, field: "key")
        }

        guard let payloadValue = object.value("payload") else { throw DatagramObject.missing("payload") }
        guard case .object(let payloadObject) = payloadValue else {
            throw DatagramObject.wrongType("payload", expected: "an object", got: payloadValue)
        }
        // The payload's own bytes, as sent. Within the datagram's bounds by construction of the parser.
        let payloadBytes = Array(UnsafeRawBufferPointer(rebasing: bytes[payloadObject.byteRange]))

        guard !groups.isEmpty || !devices.isEmpty else {
            throw ValidationError(
                code: .noTargets,
                field: "groups",
                message: "a notification needs at least one group or device"
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

        let payload = try Payload(jsonBytes: payloadBytes, field: "payload")
        try payload.validate(for: pushType, field: "payload")

        return NotificationRequest(
            id: id,
            app: app,
            groups: groups,
            devices: devices,
            pushType: pushType,
            priority: priority,
            expiration: expiration,
            collapseID: collapseID,
            payload: payload,
            createdAt: receivedAt
        )
    }
}
