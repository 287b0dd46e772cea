import Foundation

/// A notification's JSON body, as the exact bytes APNs will receive.
///
/// Validated once, when a request is accepted: it must be a JSON object (Apple: "a JSON dictionary"),
/// not compressed, and within the push type's size limit. A payload that goes to a million devices is
/// encoded once and shared.
public struct Payload: Hashable, Sendable {
    public let bytes: [UInt8]

    /// Validates `bytes` as a JSON object. The size check against a push type's limit is separate
    /// (`validate(for:)`) because the push type may be chosen after the payload is parsed.
    public init(jsonBytes bytes: [UInt8], field: String = "payload") throws(ValidationError) {
        try Self.checkSize(bytes, field: field)
        let parsed: Any
        do {
            parsed = try JSONSerialization.jsonObject(with: Data(bytes), options: [])
        } catch {
            throw ValidationError(code: .invalidPayload, field: field, message: "payload is not valid JSON")
        }
        guard parsed is [String: Any] else {
            throw ValidationError(code: .invalidPayload, field: field, message: "payload must be a JSON object")
        }
        self.bytes = bytes
    }

    /// The bytes of an object that ``StrictJSONParser`` has read (the `payload` member of a request): only
    /// the size is checked, since that parser is stricter than `JSONSerialization` at every level (the
    /// second parse was about 2.5 % of the gateway's CPU at 10,000 one-device requests a second).
    package init(parsedObject bytes: [UInt8], field: String = "payload") throws(ValidationError) {
        try Self.checkSize(bytes, field: field)
        self.bytes = bytes
    }

    private static func checkSize(_ bytes: [UInt8], field: String) throws(ValidationError) {
        guard !bytes.isEmpty else {
            throw ValidationError(code: .payloadEmpty, field: field, message: "payload is empty")
        }
        // Reject anything APNs would refuse before it costs a network round trip. The hard upper bound
        // here (the VoIP limit) keeps a hostile body from being parsed at all.
        guard bytes.count <= PushType.voip.maximumPayloadBytes else {
            throw ValidationError(
                code: .payloadTooLarge,
                field: field,
                message: "payload is \(bytes.count) bytes; APNs accepts at most \(PushType.voip.maximumPayloadBytes)"
            )
        }
    }

    public init(jsonString: String, field: String = "payload") throws(ValidationError) {
        try self.init(jsonBytes: Array(jsonString.utf8), field: field)
    }

    /// `{"aps":{"alert":TEXT}}`, with TEXT escaped as a JSON string.
    public static func alert(_ text: String) -> Payload {
        var json = #"{"aps":{"alert":"#
        json += Self.jsonStringLiteral(text)
        json += "}}"
        return Payload(unchecked: Array(json.utf8))
    }

    /// Checks the size limit of a push type.
    public func validate(for pushType: PushType, field: String = "payload") throws(ValidationError) {
        guard bytes.count <= pushType.maximumPayloadBytes else {
            throw ValidationError(
                code: .payloadTooLarge,
                field: field,
                message:
                    "payload is \(bytes.count) bytes; APNs accepts at most \(pushType.maximumPayloadBytes) for \(pushType) notifications"
            )
        }
    }

    public var count: Int { bytes.count }

    init(unchecked bytes: [UInt8]) { self.bytes = bytes }

    /// `text` as a JSON string literal (quotes and escapes): also what the JSON log lines write.
    package static func jsonStringLiteral(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
