import Foundation

/// A JSON document as read from a request body (``StrictJSONReader``). Booleans and numbers stay apart,
/// and integers stay exact when they fit in 64 bits.
enum JSONValue: Hashable, Sendable, Encodable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The JSON type's name, for error messages.
    var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .integer, .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// Parses a request body strictly (``StrictJSONReader``). Throws `APIError` 400 `malformed_json` when
    /// it is not JSON, `duplicate_key` when an object names a key twice.
    static func parse(_ bytes: [UInt8]) throws(APIError) -> JSONValue {
        let failure: StrictJSONReader.Failure
        do {
            return try StrictJSONReader.read(bytes)
        } catch {
            failure = error
        }
        switch failure {
        case .malformed(let why):
            throw APIError(.badRequest, .malformedJSON, field: "body", message: "the body is not valid JSON: \(why)")
        case .duplicateKey(let path):
            throw APIError(
                .badRequest, .duplicateKey, field: String(path.prefix(128)),
                message: "\"\(path.prefix(128))\" appears twice; JSON objects must not repeat a key")
        }
    }

    /// Compact JSON text of the value (object keys sorted, so the same value always gives the same bytes).
    func serialized() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? Array(encoder.encode(self))) ?? []
    }
}
