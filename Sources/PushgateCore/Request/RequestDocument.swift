/// How one ingress words the errors of the shared request schema (`docs/udp.md`, `docs/http.md`). The
/// rules are the same on every ingress; only the names of the codes and fields differ.
package struct RequestDialect: Sendable {
    /// What the whole request is called in errors about it (`datagram`, `body`).
    package var documentName: String
    /// The code for a key the schema does not know, and its noun in the message.
    package var unknownKey: (code: ValidationError.Code, noun: String)
    /// Whether too deep nesting has its own code (`nesting_too_deep`) or is `malformed_json`.
    package var reportsNesting: Bool
    /// Whether a JSON error names the top-level key whose value is broken (else the document).
    package var namesBrokenMember: Bool
    /// Whether a repeated key is named by its dotted path (`payload.aps.alert`), else by its top-level key.
    package var namesDuplicateByPath: Bool
    /// Whether an integer beyond 64 bits has its own code (`integer_out_of_range`) or is `wrong_type`.
    package var reportsIntegerRange: Bool

    /// The UDP ports (`docs/udp.md`).
    package static let datagram = RequestDialect(
        documentName: "datagram",
        unknownKey: (.unknownKey, "key"),
        reportsNesting: true,
        namesBrokenMember: true,
        namesDuplicateByPath: false,
        reportsIntegerRange: true
    )

    /// The HTTP API's bodies (`docs/http.md`).
    package static let body = RequestDialect(
        documentName: "body",
        unknownKey: (.unknownField, "field"),
        reportsNesting: false,
        namesBrokenMember: false,
        namesDuplicateByPath: true,
        reportsIntegerRange: false
    )
}

/// The root object of a request, with typed access to its members, turning JSON problems into
/// `ValidationError`s that name the field.
package struct RequestDocument {
    package let object: JSONObject
    package let dialect: RequestDialect

    /// Parses `bytes` as one JSON object whose keys are all in `allowedKeys`.
    ///
    /// Checks in this order, so that the reason reported for a request with several problems is
    /// stable: JSON syntax, nesting and duplicate keys (whole request), root is an object, unknown keys
    /// (the first in document order).
    package init(
        parsing bytes: UnsafeRawBufferPointer,
        allowedKeys: Set<String>,
        dialect: RequestDialect
    ) throws(ValidationError) {
        self.dialect = dialect
        let value: JSONValue
        do {
            value = try StrictJSONParser.parse(bytes)
        } catch {
            throw Self.validationError(error, dialect: dialect)
        }
        guard case .object(let object) = value else {
            throw ValidationError(
                code: .notAnObject,
                field: dialect.documentName,
                message: "the \(dialect.documentName) must be a JSON object, got \(value.kindName)"
            )
        }
        for member in object.members where !allowedKeys.contains(member.key) {
            let (code, noun) = dialect.unknownKey
            throw ValidationError(
                code: code,
                field: StrictJSONParser.quoteShort(member.key, limit: 64),
                message: "unknown \(noun) \"\(StrictJSONParser.quoteShort(member.key))\"; expected one of "
                    + allowedKeys.sorted().joined(separator: ", ")
            )
        }
        self.object = object
    }

    private static func validationError(_ error: JSONParseError, dialect: RequestDialect) -> ValidationError {
        let document = dialect.documentName
        let member = error.topLevelKey.map { StrictJSONParser.quoteShort($0, limit: 64) }
        switch error.kind {
        case .tooDeep where dialect.reportsNesting:
            return ValidationError(code: .nestingTooDeep, field: member ?? document, message: error.message)
        case .malformed, .tooDeep:
            let field = dialect.namesBrokenMember ? member ?? document : document
            return ValidationError(
                code: .malformedJSON,
                field: field,
                message: "the \(document) is not valid JSON: \(error.message)"
            )
        case .duplicateKey(let key):
            let path = error.path.joined(separator: ".")
            let field = dialect.namesDuplicateByPath ? String(path.prefix(128)) : member ?? document
            return ValidationError(
                code: .duplicateKey,
                field: field,
                message: "\"\(StrictJSONParser.quoteShort(key))\" appears twice in \"\(path.prefix(128))\"; "
                    + "JSON objects must not repeat a key"
            )
        }
    }

    package func value(_ key: String) -> JSONValue? { object[key] }

    package func string(_ key: String) throws(ValidationError) -> String? {
        guard let value = object[key] else { return nil }
        guard case .string(let string) = value else { throw Self.wrongType(key, expected: "a string", got: value) }
        return string
    }

    package func requiredString(_ key: String) throws(ValidationError) -> String {
        guard let string = try string(key) else { throw Self.missing(key) }
        return string
    }

    package func bool(_ key: String) throws(ValidationError) -> Bool? {
        guard let value = object[key] else { return nil }
        guard case .bool(let bool) = value else { throw Self.wrongType(key, expected: "true or false", got: value) }
        return bool
    }

    package func integer(_ key: String) throws(ValidationError) -> Int64? {
        guard let value = object[key] else { return nil }
        guard case .number(let number) = value, number.isInteger,
            number.integerValue != nil || dialect.reportsIntegerRange
        else {
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

    package func stringArray(_ key: String) throws(ValidationError) -> [String]? {
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

    /// The member `key`, which must be an object: its bytes as sent (from its `{` to its `}`), cut from
    /// the `bytes` this document was parsed from.
    package func objectBytes(_ key: String, in bytes: UnsafeRawBufferPointer) throws(ValidationError) -> [UInt8]? {
        guard let value = object[key] else { return nil }
        guard case .object(let member) = value else { throw Self.wrongType(key, expected: "an object", got: value) }
        return Array(UnsafeRawBufferPointer(rebasing: bytes[member.byteRange]))
    }

    package static func wrongType(_ key: String, expected: String, got value: JSONValue) -> ValidationError {
        ValidationError(code: .wrongType, field: key, message: "\(key) must be \(expected), got \(value.kindName)")
    }

    package static func missing(_ key: String) -> ValidationError {
        ValidationError(code: .missingField, field: key, message: "\(key) is required")
    }
}

extension [UInt8] {
    /// Runs `body` on the bytes, carrying its typed error out (`withUnsafeBytes` only rethrows untyped).
    package func withRequestBytes<T>(
        _ body: (UnsafeRawBufferPointer) throws(ValidationError) -> T
    ) throws(ValidationError) -> T {
        let result: Result<T, ValidationError> = withUnsafeBytes { raw in
            do throws(ValidationError) { return .success(try body(raw)) } catch { return .failure(error) }
        }
        return try result.get()
    }
}
