extension ValidationError.Code {
    /// The request is not JSON (syntax, invalid UTF-8, trailing bytes after the value).
    public static let malformedJSON = ValidationError.Code("malformed_json")
    /// Objects and arrays nested deeper than the parser allows (64 levels).
    public static let nestingTooDeep = ValidationError.Code("nesting_too_deep")
    /// The request's JSON is not an object.
    public static let notAnObject = ValidationError.Code("not_an_object")
    /// An object names the same key twice (at any level, payload included).
    public static let duplicateKey = ValidationError.Code("duplicate_key")
    /// A key the UDP port does not know (the field names it).
    public static let unknownKey = ValidationError.Code("unknown_key")
    /// A field the HTTP API does not know (the field names it).
    public static let unknownField = ValidationError.Code("unknown_field")
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
    /// An app name that the ingress does not serve.
    public static let unknownApp = ValidationError.Code("unknown_app")
    /// A notification that names no group and no device.
    public static let noTargets = ValidationError.Code("no_targets")
}

/// The rules for the names requests carry (groups, apps), on every ingress.
public enum RequestNames {
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
