/// A value that failed one of the product's input rules: a token that is not hex, a collapse id over
/// 64 bytes, an oversized payload. It names the field and the problem so that every ingress (UDP log
/// line, HTTP 400 body, CLI error) can say exactly what is wrong.
///
/// Equality is on the code and the field only, so tests can match without repeating message text.
public struct ValidationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A stable, machine-readable code (`"invalid_token"`, `"payload_too_large"`...). New codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let invalidToken = Code("invalid_token")
        public static let invalidTopic = Code("invalid_topic")
        public static let invalidPushType = Code("invalid_push_type")
        public static let invalidPriority = Code("invalid_priority")
        public static let invalidExpiration = Code("invalid_expiration")
        public static let invalidCollapseID = Code("invalid_collapse_id")
        public static let invalidAPNsID = Code("invalid_apns_id")
        public static let invalidPayload = Code("invalid_payload")
        public static let payloadTooLarge = Code("payload_too_large")
        public static let payloadEmpty = Code("payload_empty")
    }

    public let code: Code
    /// The name of the offending field as the user wrote it (`device`, `key`, `payload`...).
    public let field: String
    /// A human sentence; never contains secrets. It may quote short user input.
    public let message: String

    public init(code: Code, field: String, message: String) {
        self.code = code
        self.field = field
        self.message = message
    }

    public var description: String { "\(field): \(message)" }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code && lhs.field == rhs.field }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(field)
    }
}
