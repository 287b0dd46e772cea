/// An FCM HTTP v1 message for every device of one notification: derived and validated once, then
/// addressed to each registration token without being encoded again.
///
/// The message is kept as its JSON members without the target (`"android":{...},"data":{...}`,
/// keys sorted); ``requestBody(token:)`` wraps them as `{"message":{"token":"T",...}}`.
public struct FCMMessage: Hashable, Sendable {
    /// Google: "the maximum payload for both message types is 4096 bytes". We count the whole message
    /// without its target, which is stricter than counting `data` and `notification` alone.
    public static let maximumBytes = 4096
    /// Google: `android.ttl` at most 28 days.
    public static let maximumTTLSeconds: Int64 = 28 * 24 * 3600

    /// The message object's members without the target, without the surrounding braces.
    let members: [UInt8]

    init(members: [UInt8]) { self.members = members }

    /// The size that is checked against ``maximumBytes``: the message object without its target.
    public var byteCount: Int { members.count + 2 }

    /// The body of `messages:send` for one registration token.
    public func requestBody(token: String) -> [UInt8] {
        var body = Array(#"{"message":{"token":"#.utf8)
        body += Array(Payload.jsonStringLiteral(token).utf8)
        if !members.isEmpty {
            body.append(UInt8(ascii: ","))
            body += members
        }
        body += Array("}}".utf8)
        return body
    }

    /// The message object without its target, as JSON text (for logs of tests and docs).
    public var jsonWithoutTarget: String { "{" + String(decoding: members, as: UTF8.self) + "}" }
}

/// The optional `fcm` object of a notification request: a JSON merge patch (RFC 7396) applied to the
/// derived message. It may not name a target: the device decides that.
public struct FCMOverride: Hashable, Sendable {
    public static let targetFields = ["token", "topic", "condition", "name"]
    public let bytes: [UInt8]

    public init(jsonBytes bytes: [UInt8], field: String = "fcm") throws(ValidationError) {
        guard let object = FCMJSON.object(bytes) else {
            throw ValidationError(code: .invalidFCMMessage, field: field, message: "fcm must be a JSON object")
        }
        if let target = Self.targetFields.first(where: { object[$0] != nil }) {
            throw ValidationError(
                code: .invalidFCMMessage,
                field: "\(field).\(target)",
                message: "fcm may not set \(target): the target is the device"
            )
        }
        self.bytes = bytes
    }
}

extension ValidationError.Code {
    public static let invalidFCMMessage = ValidationError.Code("invalid_fcm_message")
}
