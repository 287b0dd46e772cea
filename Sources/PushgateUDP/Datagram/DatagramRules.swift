public import PushgateCore

extension ValidationError.Code {
    /// The datagram is not JSON (syntax, invalid UTF-8, trailing bytes after the value).
    public static let malformedJSON = ValidationError.Code("malformed_json")
    /// Objects and arrays nested deeper than the parser allows (64 levels).
    public static let nestingTooDeep = ValidationError.Code("nesting_too_deep")
    /// The datagram's JSON is not an object.
    public static let notAnObject = ValidationError.Code("not_an_object")
    /// An object names the same key twice (at any level, payload included).
    public static let duplicateKey = ValidationError.Code("duplicate_key")
    /// A key the port does not know (the field names it).
    public static let unknownKey = ValidationError.Code("unknown_key")
    /// A value of the wrong JSON type (`"groups": "g"`, `"expiration": "1"`, `"expiration": 1.5`).
    public static let wrongType = ValidationError.Code("wrong_type")
    /// A mandatory key is absent (`device`, `group`, `payload`).
    public static let missingField = ValidationError.Code("missing_field")
    /// An integer that does not fit in 64 bits.
    public static let integerOutOfRange = ValidationError.Code("integer_out_of_range")
    /// `type` is not `background`, `normal` or `urgent`.
    public static let unknownType = ValidationError.Code("unknown_type")
    /// A group name that is empty, longer than 255 bytes or holds control characters.
    public static let invalidGroup = ValidationError.Code("invalid_group")
    /// An app name that is empty, longer than 255 bytes or holds control characters.
    public static let invalidApp = ValidationError.Code("invalid_app")
    /// A notification that names no group and no device.
    public static let noTargets = ValidationError.Code("no_targets")
}

/// The rules for names that datagrams carry (groups, apps).
public enum DatagramNames {
    /// The longest group or app name, in UTF-8 bytes.
    public static let maximumByteCount = 255

    /// Checks a group name: 1 to 255 bytes of UTF-8 with no control characters (C0, DEL, C1).
    public static func validateGroup(_ name: String, field: String = "group") throws(ValidationError) {
        try validate(name, what: "group name", code: .invalidGroup, field: field)
    }

    /// Checks an app name, with the same rules as a group name.
    public static func validateApp(_ name: String, field: String = "app") throws(ValidationError) {
        try validate(name, what: "app name", code: .invalidApp, field: field)
    }

    private static func validate(
        _ name: String,
        what: String,
        code: ValidationError.Code,
        field: String
    )
        throws(ValidationError)
    {
        guard !name.isEmpty else {
            throw ValidationError(code: code, field: field, message: "\(what) must not be empty")
        }
        let count = name.utf8.count
        guard count <= maximumByteCount else {
            throw ValidationError(
                code: code,
                field: field,
                message: "\(what) must be at most \(maximumByteCount) bytes (got \(count))"
            )
        }
        for scalar in name.unicodeScalars where scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) {
            throw ValidationError(code: code, field: field, message: "\(what) must not contain control characters")
        }
    }
}

/// Typed access to the members of a datagram's root object, turning JSON problems into
/// `ValidationError`s that name the field.
struct DatagramObject {
    let object: JSONObject

    /// Parses `bytes` as one JSON object whose keys are all in `allowedKeys`.
    ///
    /// Checks in this order, so that the reason reported for a datagram with several problems is
    /// stable: JSON syntax, nesting and duplicate keys (whole datagram), root is an object, unknown keys
    /// (the first in document order).
    init(parsing bytes: UnsafeRawBufferPointer, allowedKeys: Set<String>) throws(ValidationError) {
        let value: JSONValue
        do {
            value = try StrictJSONParser.parse(bytes)
        } catch {
            let field = error.topLevelKey.map { StrictJSONParser.quoteShort($0, limit: 64) } ?? "datagram"
            switch error.kind {
            case .malformed:
                throw ValidationError(code: .malformedJSON, field: field, message: "not valid JSON: \(error.message)")
            case .tooDeep:
                throw ValidationError(code: .nestingTooDeep, field: field, message: error.message)
            case .duplicateKey:
                throw ValidationError(code: .duplicateKey, field: field, message: error.message)
            }
        }
        guard case .object(let object) = value else {
            throw ValidationError(
                code: .notAnObject,
                field: "datagram",
                message: "the datagram must be a JSON object, got \(value.kindName)"
            )
        }
        for member in object.members where !allowedKeys.contains(member.key) {
            throw ValidationError(
                code: .unknownKey,
                field: StrictJSONParser.quoteShort(member.key, limit: 64),
                message:
                    "unknown key \"\(StrictJSONParser.quoteShort(member.key))\"; expected one of \(allowedKeys.sorted().joined(separator: ", "))"
            )
        }
        self.object = object
    }

    func value(_ key: String) -> JSONValue? { object[key] }

    func string(_ key: String) throws(ValidationError) -> String? {
        guard let value = object[key] else { return nil }
        guard case .string(let string) = value else { throw Self.wrongType(key, expected: "a string", got: value) }
        return string
    }

    func requiredString(_ key: String) throws(ValidationError) -> String {
        guard let string = try string(key) else { throw Self.missing(key) }
        return string
    }

    func bool(_ key: String) throws(ValidationError) -> Bool? {
        guard let value = object[key] else { return nil }
        guard case .bool(let bool) = value else { throw Self.wrongType(key, expected: "true or false", got: value) }
        return bool
    }

    func integer(_ key: String) throws(ValidationError) -> Int64? {
        guard let value = object[key] else { return nil }
        guard case .number(let number) = value, number.isInteger else {
            throw Self.wrongType(key, expected: "an integer", got: value)
        }
        guard let integer = number.integerValue else {
            throw ValidationError(
                code: .integerOutOfRange,
                field: key,
                message: "\(key) does not fit in a 64-bit signed integer"
            )
        }
        return integer
    }

    func stringArray(_ key: String) throws(ValidationError) -> [String]? {
        guard let value = object[key] else { return nil }
        guard case .array(let elements) = value else {
            throw Self.wrongType(key, expected: "an array of strings", got: value)
        }
        var strings: [String] = []
        strings.reserveCapacity(elements.count)
        for (position, element) in elements.enumerated() {
            guard case .string(let string) = element else {
                throw ValidationError(
                    code: .wrongType,
                    field: key,
                    message: "\(key)[\(position)] must be a string, got \(element.kindName)"
                )
            }
            strings.append(string)
        }
        return strings
    }

    static func wrongType(_ key: String, expected: String, got value: JSONValue) -> ValidationError {
        ValidationError(code: .wrongType, field: key, message: "\(key) must be \(expected), got \(value.kindName)")
    }

    static func missing(_ key: String) -> ValidationError {
        ValidationError(code: .missingField, field: key, message: "\(key) is required")
    }
}

extension [UInt8] {
    /// Runs `body` on the bytes, carrying its typed error out (`withUnsafeBytes` only rethrows untyped).
    func withDatagramBytes<T>(
        _ body: (UnsafeRawBufferPointer) throws(ValidationError) -> T
    ) throws(ValidationError) -> T {
        let result: Result<T, ValidationError> = withUnsafeBytes { raw in
            do throws(ValidationError) { return .success(try body(raw)) } catch { return .failure(error) }
        }
        return try result.get()
    }
}
