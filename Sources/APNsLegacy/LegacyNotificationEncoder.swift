public import NIOCore
public import PushgateCore

/// Writes notifications in the three formats of the legacy binary provider interface, big-endian.
///
/// Each function checks everything first and throws before writing a byte, so a refused notification
/// leaves the buffer as it was. Each returns the number of bytes written.
public enum LegacyNotificationEncoder {
    /// Command 0: `|0|token length (2)|token|payload length (2)|payload|`.
    @discardableResult
    public static func writeSimple(
        token: DeviceToken,
        payload: Payload,
        into buffer: inout ByteBuffer
    ) throws(LegacyEncodingError) -> Int {
        let tokenBytes = try Self.checkedToken(token)
        try Self.checkPayload(payload, format: .simple)
        let start = buffer.writerIndex
        buffer.writeInteger(LegacyFormat.simple.rawValue)
        Self.writeLengthPrefixed(tokenBytes, into: &buffer)
        Self.writeLengthPrefixed(payload.bytes, into: &buffer)
        return buffer.writerIndex - start
    }

    /// Command 1: `|1|identifier (4)|expiry (4)|token length (2)|token|payload length (2)|payload|`.
    ///
    /// The expiry is a UNIX time in seconds; `.immediately` is 0 ("do not store"). `.storagePolicy` has no
    /// encoding in this format and is refused.
    @discardableResult
    public static func writeEnhanced(
        identifier: UInt32,
        expiration: Expiration,
        token: DeviceToken,
        payload: Payload,
        into buffer: inout ByteBuffer
    ) throws(LegacyEncodingError) -> Int {
        guard let expiry = try Self.expirySeconds(expiration) else {
            throw .expirationRequired(format: .enhanced)
        }
        let tokenBytes = try Self.checkedToken(token)
        try Self.checkPayload(payload, format: .enhanced)
        let start = buffer.writerIndex
        buffer.writeInteger(LegacyFormat.enhanced.rawValue)
        buffer.writeInteger(identifier)
        buffer.writeInteger(expiry)
        Self.writeLengthPrefixed(tokenBytes, into: &buffer)
        Self.writeLengthPrefixed(payload.bytes, into: &buffer)
        return buffer.writerIndex - start
    }

    /// Command 2: `|2|frame length (4)|items…|` with the items in id order: device token (1), payload (2),
    /// notification identifier (3), expiration date (4, omitted for `.storagePolicy`), priority (5).
    @discardableResult
    public static func writeFrame(
        identifier: UInt32,
        expiration: Expiration,
        priority: Priority,
        token: DeviceToken,
        payload: Payload,
        into buffer: inout ByteBuffer
    ) throws(LegacyEncodingError) -> Int {
        guard priority == .immediate || priority == .conservePower else {
            throw .unsupportedPriority(rawValue: priority.rawValue)
        }
        let expiry = try Self.expirySeconds(expiration)
        let tokenBytes = try Self.checkedToken(token)
        try Self.checkPayload(payload, format: .frame)

        let start = buffer.writerIndex
        buffer.writeInteger(LegacyFormat.frame.rawValue)
        let lengthIndex = buffer.writerIndex
        buffer.writeInteger(UInt32(0))  // patched below
        let itemsStart = buffer.writerIndex

        buffer.writeInteger(LegacyFrameItem.deviceToken.rawValue)
        Self.writeLengthPrefixed(tokenBytes, into: &buffer)
        buffer.writeInteger(LegacyFrameItem.payload.rawValue)
        Self.writeLengthPrefixed(payload.bytes, into: &buffer)
        buffer.writeInteger(LegacyFrameItem.notificationIdentifier.rawValue)
        buffer.writeInteger(UInt16(4))
        buffer.writeInteger(identifier)
        if let expiry {
            buffer.writeInteger(LegacyFrameItem.expirationDate.rawValue)
            buffer.writeInteger(UInt16(4))
            buffer.writeInteger(expiry)
        }
        buffer.writeInteger(LegacyFrameItem.priority.rawValue)
        buffer.writeInteger(UInt16(1))
        buffer.writeInteger(UInt8(priority.rawValue))

        buffer.setInteger(UInt32(buffer.writerIndex - itemsStart), at: lengthIndex)
        return buffer.writerIndex - start
    }

    private static func checkedToken(_ token: DeviceToken) throws(LegacyEncodingError) -> [UInt8] {
        let bytes = token.bytes
        guard bytes.count == LegacyFormat.tokenByteCount else {
            throw .invalidTokenLength(byteCount: bytes.count)
        }
        return bytes
    }

    private static func checkPayload(_ payload: Payload, format: LegacyFormat) throws(LegacyEncodingError) {
        guard payload.count <= format.maximumPayloadBytes else {
            throw .payloadTooLarge(format: format, byteCount: payload.count)
        }
    }

    /// The 4-byte expiry, or nil for "no expiry item" (`.storagePolicy`).
    private static func expirySeconds(_ expiration: Expiration) throws(LegacyEncodingError) -> UInt32? {
        switch expiration {
        case .storagePolicy:
            return nil
        case .immediately:
            return 0
        case .at(let seconds):
            guard let value = UInt32(exactly: seconds) else { throw .expirationOutOfRange(epochSeconds: seconds) }
            return value
        }
    }

    /// Both callers have checked that `bytes` fits a 2-byte length (token 32, payload ≤ 2048).
    private static func writeLengthPrefixed(_ bytes: [UInt8], into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt16(bytes.count))
        buffer.writeBytes(bytes)
    }
}
