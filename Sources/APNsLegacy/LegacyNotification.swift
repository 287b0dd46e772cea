/// A notification as a legacy gateway reads it off the wire, in any of the three formats.
///
/// The fields are raw: the decoder checks the structure (lengths, item ids, required items), not the
/// content, so that a gateway can answer a well-formed but wrong notification (a 31-byte token, an
/// oversized payload, priority 7) with the error response Apple would send.
public struct LegacyNotification: Hashable, Sendable, CustomStringConvertible {
    public var format: LegacyFormat
    /// Nil for the simple format, and for a frame without item 3.
    public var identifier: UInt32?
    /// The expiry (UNIX seconds, 0 = do not store). Nil for the simple format, and for a frame without item 4.
    public var expiry: UInt32?
    public var token: [UInt8]
    public var payload: [UInt8]
    /// The frame's priority item. Nil for the simple and enhanced formats, which have none (Apple assumed
    /// 10), and for a frame without item 5.
    public var priority: UInt8?

    public init(
        format: LegacyFormat,
        identifier: UInt32? = nil,
        expiry: UInt32? = nil,
        token: [UInt8],
        payload: [UInt8],
        priority: UInt8? = nil
    ) {
        self.format = format
        self.identifier = identifier
        self.expiry = expiry
        self.token = token
        self.payload = payload
        self.priority = priority
    }

    /// The command byte (0, 1 or 2).
    public var command: UInt8 { self.format.rawValue }

    /// Never shows the token or the payload, only their sizes.
    public var description: String {
        var text = "\(self.format)"
        if let identifier { text += " id \(identifier)" }
        if let expiry { text += " expiry \(expiry)" }
        if let priority { text += " priority \(priority)" }
        return text + ", token \(self.token.count) bytes, payload \(self.payload.count) bytes"
    }
}
