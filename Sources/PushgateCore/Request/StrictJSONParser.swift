/// The strict JSON parser (RFC 8259) of every ingress (UDP datagrams, HTTP bodies): no extensions (no
/// comments, no trailing commas, no NaN, no leading zeros, no byte order mark), UTF-8 only and validated,
/// duplicate keys rejected at every level, nesting bounded, nothing but whitespace after the value.
///
/// Numbers are not converted to `Double`: they are classified (integer or not) and integers that fit in
/// 64 bits are read exactly. The input is never copied except for strings with escapes.
package struct StrictJSONParser: ~Copyable {
    /// Deeper nesting than any real payload needs; bounds the parser's recursion.
    package static let maximumDepth = 64

    private let bytes: UnsafeRawBufferPointer
    private var index = 0
    private var depth = 0
    /// Keys of the objects being parsed, outermost first (see ``JSONParseError/path``).
    private var path: [String] = []

    private init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    /// Parses one JSON text that spans all of `bytes` (surrounding whitespace allowed).
    package static func parse(_ bytes: UnsafeRawBufferPointer) throws(JSONParseError) -> JSONValue {
        var parser = StrictJSONParser(bytes: bytes)
        parser.skipWhitespace()
        let value = try parser.parseValue()
        parser.skipWhitespace()
        guard parser.index == bytes.count else {
            throw parser.error(.malformed, "unexpected bytes after the JSON value")
        }
        return value
    }

    package static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        // `withUnsafeBytes` is not typed-throws: carry the error out as a result.
        let result: Result<JSONValue, JSONParseError> = bytes.withUnsafeBytes { raw in
            do throws(JSONParseError) { return .success(try parse(raw)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    // MARK: - Values

    private mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard let byte = peek() else { throw error(.malformed, "unexpected end of input, expected a value") }
        switch byte {
        case UInt8(ascii: "{"): return .object(try parseObject())
        case UInt8(ascii: "["): return .array(try parseArray())
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return .number(try parseNumber())
        default:
            throw error(.malformed, "unexpected character \(Self.describe(byte)), expected a value")
        }
    }

    private mutating func parseObject() throws(JSONParseError) -> JSONObject {
        let start = index
        try enterContainer()
        index += 1  // {
        var members: [JSONMember] = []
        var seen: Set<String>? = nil  // built once an object grows past a few keys
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return JSONObject(members: [], byteRange: start..<index)
        }
        while true {
            guard peek() == UInt8(ascii: "\"") else {
                throw error(
                    .malformed,
                    peek() == nil ? "unexpected end of input in an object" : "expected a string key"
                )
            }
            let keyOffset = index
            let key = try parseString()
            if seen == nil, members.count >= 8 { seen = Set(members.map(\.key)) }
            let duplicate = seen.map { $0.contains(key) } ?? members.contains { $0.key == key }
            if duplicate {
                throw JSONParseError(
                    kind: .duplicateKey(key),
                    message: "duplicate key \"\(Self.quoteShort(key))\"",
                    offset: keyOffset,
                    path: path + [key]
                )
            }
            seen?.insert(key)
            skipWhitespace()
            guard peek() == UInt8(ascii: ":") else { throw error(.malformed, "expected ':' after an object key") }
            index += 1
            skipWhitespace()
            path.append(key)
            let value = try parseValue()
            path.removeLast()
            members.append(JSONMember(key: key, value: value))
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","):
                index += 1
                skipWhitespace()
            case UInt8(ascii: "}"):
                index += 1
                depth -= 1
                return JSONObject(members: members, byteRange: start..<index)
            case nil: throw error(.malformed, "unexpected end of input in an object")
            default: throw error(.malformed, "expected ',' or '}' in an object")
            }
        }
    }

    private mutating func parseArray() throws(JSONParseError) -> [JSONValue] {
        try enterContainer()
        index += 1  // [
        var elements: [JSONValue] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return elements
        }
        while true {
            elements.append(try parseValue())
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","):
                index += 1
                skipWhitespace()
            case UInt8(ascii: "]"):
                index += 1
                depth -= 1
                return elements
            case nil: throw error(.malformed, "unexpected end of input in an array")
            default: throw error(.malformed, "expected ',' or ']' in an array")
            }
        }
    }

    private mutating func enterContainer() throws(JSONParseError) {
        depth += 1
        guard depth <= Self.maximumDepth else {
            throw error(.tooDeep, "objects and arrays are nested deeper than \(Self.maximumDepth) levels")
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - index >= count else { throw error(.malformed, "invalid literal") }
        let matches = literal.withUTF8Buffer { expected in
            var offset = 0
            while offset < count {
                if bytes[index + offset] != expected[offset] { return false }
                offset += 1
            }
            return true
        }
        guard matches else { throw error(.malformed, "invalid literal") }
        index += count
    }

    // MARK: - Numbers

    private mutating func parseNumber() throws(JSONParseError) -> JSONNumber {
        let negative = peek() == UInt8(ascii: "-")
        if negative { index += 1 }
        // Accumulate negatively so that Int64.min is representable.
        var value: Int64 = 0
        var overflow = false
        guard let first = peek(), Self.isDigit(first) else { throw error(.malformed, "expected a digit") }
        if first == UInt8(ascii: "0") {
            index += 1
            if let next = peek(), Self.isDigit(next) { throw error(.malformed, "numbers must not have leading zeros") }
        } else {
            while let digit = peek(), Self.isDigit(digit) {
                index += 1
                if overflow { continue }
                let (times10, o1) = value.multipliedReportingOverflow(by: 10)
                let (next, o2) = times10.subtractingReportingOverflow(Int64(digit &- UInt8(ascii: "0")))
                if o1 || o2 { overflow = true } else { value = next }
            }
        }
        var isInteger = true
        if peek() == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard let digit = peek(), Self.isDigit(digit) else {
                throw error(.malformed, "expected a digit after the decimal point")
            }
            while let digit = peek(), Self.isDigit(digit) { index += 1 }
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
            guard let digit = peek(), Self.isDigit(digit) else {
                throw error(.malformed, "expected a digit in the exponent")
            }
            while let digit = peek(), Self.isDigit(digit) { index += 1 }
        }
        guard isInteger, !overflow else { return JSONNumber(isInteger: isInteger, integerValue: nil) }
        if negative { return JSONNumber(isInteger: true, integerValue: value) }
        guard value != .min else { return JSONNumber(isInteger: true, integerValue: nil) }
        return JSONNumber(isInteger: true, integerValue: -value)
    }

    // MARK: - Strings

    private mutating func parseString() throws(JSONParseError) -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: no escapes, so the bytes are the string's UTF-8.
        while let byte = peek() {
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
                guard let string = String(validating: slice, as: UTF8.self) else {
                    throw error(.malformed, "string is not valid UTF-8", at: start)
                }
                index += 1
                return string
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw error(.malformed, "unescaped control character in a string") }
            index += 1
        }
        guard peek() != nil else { throw error(.malformed, "unterminated string", at: start - 1) }
        var utf8 = Array(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
        while let byte = peek() {
            switch byte {
            case UInt8(ascii: "\""):
                guard let string = String(validating: utf8, as: UTF8.self) else {
                    throw error(.malformed, "string is not valid UTF-8", at: start)
                }
                index += 1
                return string
            case UInt8(ascii: "\\"):
                try parseEscape(into: &utf8)
            case 0..<0x20:
                throw error(.malformed, "unescaped control character in a string")
            default:
                utf8.append(byte)
                index += 1
            }
        }
        throw error(.malformed, "unterminated string", at: start - 1)
    }

    private mutating func parseEscape(into utf8: inout [UInt8]) throws(JSONParseError) {
        let escapeOffset = index
        index += 1  // backslash
        guard let byte = peek() else { throw error(.malformed, "unterminated escape sequence") }
        index += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(byte)
        case UInt8(ascii: "b"): utf8.append(0x08)
        case UInt8(ascii: "f"): utf8.append(0x0c)
        case UInt8(ascii: "n"): utf8.append(0x0a)
        case UInt8(ascii: "r"): utf8.append(0x0d)
        case UInt8(ascii: "t"): utf8.append(0x09)
        case UInt8(ascii: "u"):
            let unit = try parseHex4()
            let scalarValue: UInt32
            switch unit {
            case 0xD800...0xDBFF:
                // A high surrogate must be followed by an escaped low surrogate.
                guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"),
                    bytes[index + 1] == UInt8(ascii: "u")
                else { throw error(.malformed, "unpaired surrogate in a \\u escape", at: escapeOffset) }
                index += 2
                let low = try parseHex4()
                guard (0xDC00...0xDFFF).contains(low) else {
                    throw error(.malformed, "unpaired surrogate in a \\u escape", at: escapeOffset)
                }
                scalarValue = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
            case 0xDC00...0xDFFF:
                throw error(.malformed, "unpaired surrogate in a \\u escape", at: escapeOffset)
            default:
                scalarValue = UInt32(unit)
            }
            // Cannot fail: surrogates were handled above.
            let scalar = Unicode.Scalar(scalarValue) ?? "\u{FFFD}"
            utf8.append(contentsOf: UTF8.encode(scalar)!)
        default:
            throw error(.malformed, "invalid escape sequence \\\(Self.describe(byte, quoted: false))", at: escapeOffset)
        }
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt16 {
        guard bytes.count - index >= 4 else { throw error(.malformed, "expected four hex digits after \\u") }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let nibble: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = byte - UInt8(ascii: "A") + 10
            default: throw error(.malformed, "expected four hex digits after \\u")
            }
            value = value << 4 | UInt16(nibble)
            index += 1
        }
        return value
    }

    // MARK: - Helpers

    private func peek() -> UInt8? {
        index < bytes.count ? bytes[index] : nil
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): index += 1
            default: return
            }
        }
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    private func error(_ kind: JSONParseError.Kind, _ message: String, at offset: Int? = nil) -> JSONParseError {
        let offset = offset ?? index
        return JSONParseError(
            kind: kind,
            message: "\(message) at byte \(offset)",
            offset: offset,
            path: path
        )
    }

    private static func describe(_ byte: UInt8, quoted: Bool = true) -> String {
        if byte >= 0x21, byte < 0x7f {
            let character = String(UnicodeScalar(byte))
            return quoted ? "'\(character)'" : character
        }
        return "0x" + String(byte, radix: 16)
    }

    /// A user-supplied string cut short for a message.
    package static func quoteShort(_ text: String, limit: Int = 32) -> String {
        var result = ""
        for scalar in text.unicodeScalars.prefix(limit) {
            result.unicodeScalars.append(scalar.value < 0x20 || scalar.value == 0x7f ? "?" : scalar)
        }
        return text.unicodeScalars.count > limit ? result + "…" : result
    }
}
