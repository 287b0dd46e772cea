public import Foundation
public import NIOCore
public import PushgateCore

/// What a registration datagram (port 7734) asks for.
public enum RegistrationCommand: Hashable, Sendable {
    /// Add the device to the group (the C pushd's only request).
    case register(Registration)
    /// Take the device out of the group (`"remove": true`, an extension).
    case unassign(app: String, token: DeviceToken, group: String)

    public var app: String {
        switch self {
        case .register(let registration): registration.app
        case .unassign(let app, _, _): app
        }
    }

    public var token: DeviceToken {
        switch self {
        case .register(let registration): registration.token
        case .unassign(_, let token, _): token
        }
    }

    public var group: String {
        switch self {
        case .register(let registration): registration.group
        case .unassign(_, _, let group): group
        }
    }
}

/// The registration datagram: `{"device": "<hex token>", "group": "<name>"}`, as the C pushd reads it,
/// plus the optional extension keys `"app"` (a string; default ``Registration/defaultApp``) and
/// `"remove"` (a boolean; `true` unassigns the device from the group instead).
///
/// Pure: no I/O, no clock (the receive time is passed in). Any problem rejects the whole datagram with a
/// `ValidationError` naming the field; see `docs/udp.md` for the codes.
public enum RegistrationDatagram {
    public static let allowedKeys: Set<String> = ["device", "group", "app", "remove"]

    public static func parse(_ bytes: [UInt8], receivedAt: Date) throws(ValidationError) -> RegistrationCommand {
        try bytes.withDatagramBytes { raw throws(ValidationError) in try parse(raw, receivedAt: receivedAt) }
    }

    public static func parse(_ buffer: ByteBuffer, receivedAt: Date) throws(ValidationError) -> RegistrationCommand {
        let result: Result<RegistrationCommand, ValidationError> = buffer.withUnsafeReadableBytes { raw in
            do throws(ValidationError) { return .success(try parse(raw, receivedAt: receivedAt)) } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    static func parse(_ bytes: UnsafeRawBufferPointer, receivedAt: Date) throws(ValidationError) -> RegistrationCommand
    {
        let object = try DatagramObject(parsing: bytes, allowedKeys: allowedKeys)
        let app = try object.string("app") ?? Registration.defaultApp
        try DatagramNames.validateApp(app)
        let token = try DeviceToken(hex: try object.requiredString("device"), field: "device")
        let group = try object.requiredString("group")
        try DatagramNames.validateGroup(group)
        if try object.bool("remove") == true {
            return .unassign(app: app, token: token, group: group)
        }
        return .register(Registration(app: app, token: token, group: group, at: receivedAt))
    }
}
