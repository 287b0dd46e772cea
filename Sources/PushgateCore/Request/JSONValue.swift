/// A parsed JSON value, as ``StrictJSONParser`` produces it.
///
/// Objects keep their members in document order (there are no duplicates: the parser rejects them)
/// and the byte range they occupy in the input, so that a notification's payload can be passed on as
/// the bytes the sender wrote instead of being re-serialised.
package enum JSONValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// The JSON type's name, for messages ("expected an integer, got a string").
    package var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number(let number): number.isInteger ? "an integer" : "a fractional number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// A JSON number, classified without converting it to a floating-point value.
package struct JSONNumber: Hashable, Sendable {
    /// True when the literal has neither a fraction nor an exponent (`12`, `-3`; not `1.0`, not `1e3`).
    package var isInteger: Bool
    /// The value, when `isInteger` and it fits in 64 bits; nil otherwise.
    package var integerValue: Int64?

    package init(isInteger: Bool, integerValue: Int64?) {
        self.isInteger = isInteger
        self.integerValue = integerValue
    }
}

package struct JSONObject: Hashable, Sendable {
    package var members: [JSONMember]
    /// Where the object is in the parsed bytes, from its `{` to its `}` inclusive.
    package var byteRange: Range<Int>

    package init(members: [JSONMember], byteRange: Range<Int>) {
        self.members = members
        self.byteRange = byteRange
    }

    package subscript(key: String) -> JSONValue? {
        for member in members where member.key == key { return member.value }
        return nil
    }
}

package struct JSONMember: Hashable, Sendable {
    package var key: String
    package var value: JSONValue

    package init(key: String, value: JSONValue) {
        self.key = key
        self.value = value
    }
}

/// Why the bytes are not acceptable JSON.
package struct JSONParseError: Error, Hashable, Sendable {
    package enum Kind: Hashable, Sendable {
        /// Not JSON (RFC 8259): a syntax error, invalid UTF-8, a control character in a string, a lone
        /// surrogate escape, trailing bytes after the value.
        case malformed
        /// An object names the same key twice (`key` is the repeated one).
        case duplicateKey(String)
        /// Objects and arrays nested deeper than ``StrictJSONParser/maximumDepth``.
        case tooDeep
    }

    package var kind: Kind
    package var message: String
    /// Byte offset of the problem.
    package var offset: Int
    /// The object keys from the root to the value being parsed (arrays add nothing); for a duplicate key,
    /// ends with the repeated key. Empty at the root itself.
    package var path: [String]

    /// The member of the root object whose value was being parsed, so the caller can name the field.
    package var topLevelKey: String? { path.first }
}
