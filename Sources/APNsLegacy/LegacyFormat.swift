/// The three notification formats of Apple's legacy binary provider interface, by command byte.
///
/// Apple retired this interface on 31 March 2021; gateways and test rigs still speak it. See
/// `docs/legacy.md` for the wire layouts and the limits chosen here.
public enum LegacyFormat: UInt8, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    /// Command 0: `|0|token length (2)|token|payload length (2)|payload|`. No identifier, so a failure
    /// cannot be attributed to a notification.
    case simple = 0
    /// Command 1: `|1|identifier (4)|expiry (4)|token length (2)|token|payload length (2)|payload|`.
    case enhanced = 1
    /// Command 2: `|2|frame length (4)|items…|`, each item `|id (1)|length (2)|data|`.
    case frame = 2

    /// The token size the legacy gateway accepts: exactly 32 bytes, in every format. (The frame item could
    /// carry up to 100, but Apple's gateway never issued or accepted anything but 32.)
    public static let tokenByteCount = 32

    /// The largest payload this format may carry.
    ///
    /// - Commands 0 and 1: 256 bytes, the limit of the era these formats belong to (the seed clients
    ///   check 255 and 256; Apple's documentation of these formats said 256).
    /// - Command 2: 2048 bytes, the limit Apple's archived documentation gives for the frame format.
    public var maximumPayloadBytes: Int {
        switch self {
        case .simple, .enhanced: 256
        case .frame: 2048
        }
    }

    public var description: String {
        switch self {
        case .simple: "simple (command 0)"
        case .enhanced: "enhanced (command 1)"
        case .frame: "frame (command 2)"
        }
    }
}

/// The item identifiers of the frame format (command 2).
public enum LegacyFrameItem: UInt8, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    /// The device token (required).
    case deviceToken = 1
    /// The JSON payload (required).
    case payload = 2
    /// A 4-byte opaque identifier, echoed in an error response.
    case notificationIdentifier = 3
    /// A 4-byte UNIX time (seconds); 0 means deliver once and do not store.
    case expirationDate = 4
    /// One byte: 10 (immediately) or 5 (conserve power).
    case priority = 5

    /// The exact data length of a fixed-size item, nil for the variable ones.
    var fixedLength: Int? {
        switch self {
        case .deviceToken, .payload: nil
        case .notificationIdentifier, .expirationDate: 4
        case .priority: 1
        }
    }

    public var description: String {
        switch self {
        case .deviceToken: "device token (1)"
        case .payload: "payload (2)"
        case .notificationIdentifier: "notification identifier (3)"
        case .expirationDate: "expiration date (4)"
        case .priority: "priority (5)"
        }
    }
}
