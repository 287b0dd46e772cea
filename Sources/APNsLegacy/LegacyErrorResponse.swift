public import NIOCore

/// The 6-byte error response of the legacy gateway: `|8|status (1)|identifier (4)|`. After sending it the
/// gateway closes the connection; everything sent after `identifier` must be sent again.
public struct LegacyErrorResponse: Hashable, Sendable, CustomStringConvertible {
    /// The command byte of an error response.
    public static let command: UInt8 = 8
    /// The size of an error response on the wire.
    public static let byteCount = 6

    public var status: LegacyErrorStatus
    /// The identifier of the failed notification, or for `.shutdown` the last one processed.
    public var identifier: UInt32

    public init(status: LegacyErrorStatus, identifier: UInt32) {
        self.status = status
        self.identifier = identifier
    }

    /// Writes the 6 bytes (what a gateway, such as the simulator, sends). Returns the bytes written.
    @discardableResult
    public func write(into buffer: inout ByteBuffer) -> Int {
        buffer.writeInteger(Self.command)
        buffer.writeInteger(self.status.rawValue)
        buffer.writeInteger(self.identifier)
        return Self.byteCount
    }

    public var description: String { "\(self.status) for identifier \(self.identifier)" }
}

/// The status byte of an error response, with the meanings Apple documented. Values Apple never documented
/// are kept as `.unknown(raw)`.
public enum LegacyErrorStatus: Hashable, Sendable, CustomStringConvertible {
    /// 0
    case noErrors
    /// 1
    case processingError
    /// 2
    case missingDeviceToken
    /// 3
    case missingTopic
    /// 4
    case missingPayload
    /// 5
    case invalidTokenSize
    /// 6
    case invalidTopicSize
    /// 7
    case invalidPayloadSize
    /// 8: the token is not valid for this gateway (sandbox against production, or the app was removed).
    case invalidToken
    /// 10: the gateway is shutting down; the identifier is the last notification it processed
    /// successfully, and everything after it must be resent.
    case shutdown
    /// 128
    case protocolError
    /// 255: "None (unknown)".
    case unknownError
    /// A value Apple never documented.
    case unknown(UInt8)

    /// Every documented status, in wire order.
    public static let documented: [LegacyErrorStatus] = [
        .noErrors, .processingError, .missingDeviceToken, .missingTopic, .missingPayload, .invalidTokenSize,
        .invalidTopicSize, .invalidPayloadSize, .invalidToken, .shutdown, .protocolError, .unknownError,
    ]

    public init(rawValue: UInt8) {
        switch rawValue {
        case 0: self = .noErrors
        case 1: self = .processingError
        case 2: self = .missingDeviceToken
        case 3: self = .missingTopic
        case 4: self = .missingPayload
        case 5: self = .invalidTokenSize
        case 6: self = .invalidTopicSize
        case 7: self = .invalidPayloadSize
        case 8: self = .invalidToken
        case 10: self = .shutdown
        case 128: self = .protocolError
        case 255: self = .unknownError
        default: self = .unknown(rawValue)
        }
    }

    public var rawValue: UInt8 {
        switch self {
        case .noErrors: 0
        case .processingError: 1
        case .missingDeviceToken: 2
        case .missingTopic: 3
        case .missingPayload: 4
        case .invalidTokenSize: 5
        case .invalidTopicSize: 6
        case .invalidPayloadSize: 7
        case .invalidToken: 8
        case .shutdown: 10
        case .protocolError: 128
        case .unknownError: 255
        case .unknown(let raw): raw
        }
    }

    /// Apple's wording for the status.
    public var meaning: String {
        switch self {
        case .noErrors: "No errors encountered"
        case .processingError: "Processing error"
        case .missingDeviceToken: "Missing device token"
        case .missingTopic: "Missing topic"
        case .missingPayload: "Missing payload"
        case .invalidTokenSize: "Invalid token size"
        case .invalidTopicSize: "Invalid topic size"
        case .invalidPayloadSize: "Invalid payload size"
        case .invalidToken: "Invalid token"
        case .shutdown: "Shutdown"
        case .protocolError: "Protocol error"
        case .unknownError: "None (unknown)"
        case .unknown: "Undocumented status"
        }
    }

    public var description: String { "\(self.rawValue) \(self.meaning)" }
}
