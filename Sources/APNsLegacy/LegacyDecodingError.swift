/// Bytes that do not form a legacy binary protocol message: a wrong command byte, a malformed frame, a
/// feedback tuple with an impossible token length, or a message cut off by the end of the stream.
///
/// Equality is on the code. `description` names the problem; it never contains token or payload bytes.
/// When the notification identifier was read before the problem was found, `notificationIdentifier`
/// carries it, so a server can name the notification in its error response.
public struct LegacyDecodingError: Error, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    private enum Code: Hashable {
        case unexpectedCommand(UInt8, expected: [UInt8])
        case frameTooLong(length: Int, limit: Int)
        case unknownItem(id: UInt8, identifier: UInt32?)
        case itemOverrunsFrame(id: UInt8, length: Int, remaining: Int, identifier: UInt32?)
        case invalidItemLength(item: LegacyFrameItem, length: Int, identifier: UInt32?)
        case duplicateItem(item: LegacyFrameItem, identifier: UInt32?)
        case missingItem(item: LegacyFrameItem, identifier: UInt32?)
        case invalidFeedbackTokenLength(Int)
        case truncated(remainingBytes: Int)
    }

    private let code: Code

    private init(_ code: Code) {
        self.code = code
    }

    /// The first byte is not a command this decoder reads.
    public static func unexpectedCommand(_ command: UInt8, expected: [UInt8]) -> Self {
        .init(.unexpectedCommand(command, expected: expected))
    }

    /// A frame declares more bytes than the decoder is willing to buffer.
    public static func frameTooLong(length: Int, limit: Int) -> Self {
        .init(.frameTooLong(length: length, limit: limit))
    }

    /// A frame item id outside 1…5.
    public static func unknownItem(id: UInt8, identifier: UInt32? = nil) -> Self {
        .init(.unknownItem(id: id, identifier: identifier))
    }

    /// An item header, or its declared data, runs past the end of the frame.
    public static func itemOverrunsFrame(id: UInt8, length: Int, remaining: Int, identifier: UInt32? = nil) -> Self {
        .init(.itemOverrunsFrame(id: id, length: length, remaining: remaining, identifier: identifier))
    }

    /// A fixed-size item (identifier 4, expiration 4, priority 1) with another length.
    public static func invalidItemLength(_ item: LegacyFrameItem, length: Int, identifier: UInt32? = nil) -> Self {
        .init(.invalidItemLength(item: item, length: length, identifier: identifier))
    }

    /// The same item twice in one frame.
    public static func duplicateItem(_ item: LegacyFrameItem, identifier: UInt32? = nil) -> Self {
        .init(.duplicateItem(item: item, identifier: identifier))
    }

    /// A frame without a device token or without a payload.
    public static func missingItem(_ item: LegacyFrameItem, identifier: UInt32? = nil) -> Self {
        .init(.missingItem(item: item, identifier: identifier))
    }

    /// A feedback tuple whose token length is outside what a device token can be (8 to 100 bytes).
    public static func invalidFeedbackTokenLength(_ length: Int) -> Self {
        .init(.invalidFeedbackTokenLength(length))
    }

    /// The stream ended in the middle of a message.
    public static func truncated(remainingBytes: Int) -> Self {
        .init(.truncated(remainingBytes: remainingBytes))
    }

    /// The identifier of the notification being decoded, when it had been read.
    public var notificationIdentifier: UInt32? {
        switch self.code {
        case .unknownItem(_, let identifier), .itemOverrunsFrame(_, _, _, let identifier),
            .invalidItemLength(_, _, let identifier), .duplicateItem(_, let identifier),
            .missingItem(_, let identifier):
            identifier
        case .unexpectedCommand, .frameTooLong, .invalidFeedbackTokenLength, .truncated:
            nil
        }
    }

    public var description: String {
        switch self.code {
        case .unexpectedCommand(let command, let expected):
            "unexpected command byte \(command); expected \(expected.map(String.init).joined(separator: " or "))"
        case .frameTooLong(let length, let limit):
            "frame length \(length) exceeds the limit of \(limit) bytes"
        case .unknownItem(let id, _):
            "unknown frame item id \(id)"
        case .itemOverrunsFrame(let id, let length, let remaining, _):
            "frame item \(id) needs \(length) bytes but only \(remaining) remain in the frame"
        case .invalidItemLength(let item, let length, _):
            "frame item \(item) has length \(length); it must be \(item.fixedLength ?? 0)"
        case .duplicateItem(let item, _):
            "frame item \(item) appears more than once"
        case .missingItem(let item, _):
            "frame has no \(item) item"
        case .invalidFeedbackTokenLength(let length):
            "feedback tuple token length \(length) is not a device token size (8 to 100 bytes)"
        case .truncated(let remaining):
            "the stream ended inside a message (\(remaining) bytes left over)"
        }
    }

    public var debugDescription: String {
        if let identifier = self.notificationIdentifier {
            return "LegacyDecodingError(\(self.description), identifier \(identifier))"
        }
        return "LegacyDecodingError(\(self.description))"
    }
}
