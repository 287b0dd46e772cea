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

/// The registration datagram (port 7734): the core's registration (`RegistrationSchema`, `docs/udp.md`),
/// with its errors worded for the UDP port.
///
/// Pure: no I/O, no clock (the receive time is passed in).
public enum RegistrationDatagram {
    public static var allowedKeys: Set<String> { RegistrationSchema.allowedKeys }

    public static func parse(_ bytes: [UInt8], receivedAt: Date) throws(ValidationError) -> RegistrationCommand {
        try bytes.withRequestBytes { raw throws(ValidationError) in try parse(raw, receivedAt: receivedAt) }
    }

    public static func parse(_ buffer: ByteBuffer, receivedAt: Date) throws(ValidationError) -> RegistrationCommand {
        try buffer.withRequestBytes { raw throws(ValidationError) in try parse(raw, receivedAt: receivedAt) }
    }

    static func parse(_ bytes: UnsafeRawBufferPointer, receivedAt: Date) throws(ValidationError) -> RegistrationCommand
    {
        let fields = try RegistrationSchema.read(bytes, dialect: .datagram, receivedAt: receivedAt)
        let registration = fields.registration
        if fields.remove {
            return .unassign(app: registration.app, token: registration.token, group: registration.group)
        }
        return .register(registration)
    }
}
