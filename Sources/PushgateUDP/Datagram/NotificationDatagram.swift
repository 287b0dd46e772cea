public import Foundation
public import NIOCore
public import PushgateCore

/// The notification datagram (port 7874): the core's notification request (`NotificationRequestSchema`,
/// `docs/udp.md`), with its errors worded for the UDP port and the app `default` when none is named.
///
/// The payload is kept as the bytes the sender wrote, never re-serialised. Pure: the request id and the
/// receive time are passed in.
public enum NotificationDatagram {
    public static var allowedKeys: Set<String> { NotificationRequestSchema.allowedKeys }

    public static func parse(
        _ bytes: [UInt8],
        id: RequestID,
        receivedAt: Date
    ) throws(ValidationError)
        -> NotificationRequest
    {
        try bytes.withRequestBytes { raw throws(ValidationError) in try parse(raw, id: id, receivedAt: receivedAt) }
    }

    public static func parse(
        _ buffer: ByteBuffer,
        id: RequestID,
        receivedAt: Date
    ) throws(ValidationError)
        -> NotificationRequest
    {
        try buffer.withRequestBytes { raw throws(ValidationError) in try parse(raw, id: id, receivedAt: receivedAt) }
    }

    static func parse(
        _ bytes: UnsafeRawBufferPointer,
        id: RequestID,
        receivedAt: Date
    ) throws(ValidationError)
        -> NotificationRequest
    {
        try NotificationRequestSchema.read(bytes, dialect: .datagram, id: id, receivedAt: receivedAt) {
            name throws(ValidationError) in
            let app = name ?? Registration.defaultApp
            try RequestNames.validateApp(app)
            return app
        }
    }
}

extension ByteBuffer {
    /// Runs `body` on the readable bytes, carrying its typed error out.
    func withRequestBytes<T>(
        _ body: (UnsafeRawBufferPointer) throws(ValidationError) -> T
    ) throws(ValidationError) -> T {
        let result: Result<T, ValidationError> = withUnsafeReadableBytes { raw in
            do throws(ValidationError) { return .success(try body(raw)) } catch { return .failure(error) }
        }
        return try result.get()
    }
}
