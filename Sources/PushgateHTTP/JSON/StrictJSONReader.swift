import Foundation

/// A strict JSON reader (RFC 8259) for request bodies. Foundation's decoder keeps the last of two equal
/// keys without a word, so `{"app": "a", "app": "b"}` would be read as whichever the decoder liked; the
/// API refuses such a body instead (`duplicate_key`). No extensions: no comments, trailing commas, NaN,
/// leading zeros or byte order mark; UTF-8 validated; nesting bounded; nothing after the value.
struct StrictJSONReader {
    /// Deeper than any real payload; bounds the recursion.
    static let maximumDepth = 64

    enum Failure: Error, Equatable {
        case malformed(String)
        /// `path` is the dotted path of the object holding the key twice, then the key (`payload.aps.alert`).
        case duplicateKey(path: String)
    }

    private let bytes: [UInt8]
    private var index = 0
    private var path: [String] = []

    private init(_ bytes: [UInt8]) { self.bytes = bytes }

    static func read(_ bytes: [UInt8]) throws(Failure) -> JSONValue {
        var reader = StrictJSONReader(bytes)
        reader.skipWhitespace()
        let value = try reader.value(depth: 0)
        reader.skipWhitespace()
        guard reader.index == bytes.count else { throw reader.failure("unexpected bytes after the value") }
        return value
    }

    private func failure(_ what: String) -> Failure { .malformed("\(what) at byte \(index)") }

    private mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x09, 0x0a, 0x0d].contains(bytes[index]) { index += 1 }
    }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func expect(_ literal: StaticString) throws(Failure) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw failure("truncated literal") }
        for offset in 0..<count where bytes[index + offset] != literal.utf8Start[offset] {
            throw failure("invalid literal")
        }
        index += count
    }

    private mutating func value(depth: Int) throws(Failure) -> JSONValue {
        guard depth <= Self.maximumDepth else { throw failure("nesting deeper than \(Self.maximumDepth)") }
        guard let byte = current else { throw failure("unexpected end of input") }
        switch byte {
        case UInt8(ascii: "{"): return try object(depth: depth)
        case UInt8(ascii: "["): return try array(depth: depth)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"):
            try expect("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expect("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expect("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw failure("unexpected character")
        }
    }

    private mutating func object(depth: Int) throws(Failure) -> JSONValue {
        index += 1
        var members: [String: JSONValue] = [:]
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw failure("expected a member name") }
            let key = try string()
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { throw failure("expected ':'") }
            index += 1
            skipWhitespace()
            path.append(key)
            let member = try value(depth: depth + 1)
            guard members.updateValue(member, forKey: key) == nil else {
                throw .duplicateKey(path: path.joined(separator: "."))
            }
            path.removeLast()
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return .object(members)
            default: throw failure("expected ',' or '}'")
            }
        }
    }

    private mutating func array(depth: Int) throws(Failure) -> JSONValue {
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try value(depth: depth + 1))
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return .array(elements)
            default: throw failure("expected ',' or ']'")
            }
        }
    }

    private mutating func number() throws(Failure) -> JSONValue {
        let start = index
        if current == UInt8(ascii: "-") { index += 1 }
        guard let first = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
            throw failure("expected a digit")
        }
        index += 1
        if first != UInt8(ascii: "0") { skipDigits() }
        var integral = true
        if current == UInt8(ascii: ".") {
            integral = false
            index += 1
            guard try requireDigits() else { throw failure("expected a digit after '.'") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            integral = false
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard try requireDigits() else { throw failure("expected a digit in the exponent") }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if integral, let integer = Int64(text) { return .integer(integer) }
        guard let double = Double(text), double.isFinite else { throw failure("number out of range") }
        return .number(double)
    }

    private mutating func skipDigits() {
        while let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { index += 1 }
    }

    private mutating func requireDigits() throws(Failure) -> Bool {
        let start = index
        skipDigits()
        return index > start
    }

    private mutating func string() throws(Failure) -> String {
        index += 1
        var scalars = String.UnicodeScalarView()
        var runStart = index
        func flush(_ reader: StrictJSONReader, _ scalars: inout String.UnicodeScalarView, upTo end: Int) throws(Failure)
        {
            guard runStart < end else { return }
            guard let run = String(validating: reader.bytes[runStart..<end], as: UTF8.self) else {
                throw reader.failure("invalid UTF-8")
            }
            scalars.append(contentsOf: run.unicodeScalars)
        }
        while true {
            guard let byte = current else { throw failure("unterminated string") }
            switch byte {
            case UInt8(ascii: "\""):
                try flush(self, &scalars, upTo: index)
                index += 1
                return String(scalars)
            case UInt8(ascii: "\\"):
                try flush(self, &scalars, upTo: index)
                index += 1
                scalars.append(try escape())
                runStart = index
            case 0x00..<0x20:
                throw failure("control character in a string")
            default:
                index += 1
            }
        }
    }

    private mutating func escape() throws(Failure) -> Unicode.Scalar {
        guard let byte = current else { throw failure("unterminated escape") }
        index += 1
        switch byte {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let high = try hex4()
            if (0xD800...0xDBFF).contains(high) {
                guard current == UInt8(ascii: "\\") else { throw failure("lone surrogate") }
                index += 1
                guard current == UInt8(ascii: "u") else { throw failure("lone surrogate") }
                index += 1
                let low = try hex4()
                guard (0xDC00...0xDFFF).contains(low) else { throw failure("lone surrogate") }
                return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))!
            }
            guard let scalar = Unicode.Scalar(high) else { throw failure("lone surrogate") }
            return scalar
        default:
            throw failure("invalid escape")
        }
    }

    private mutating func hex4() throws(Failure) -> UInt32 {
        guard index + 4 <= bytes.count else { throw failure("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure("invalid \\u escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }
}
