import PushgateCore
import Testing

@testable import PushgateUDP

@Suite("Strict JSON parser")
struct StrictJSONParserTests {
    private func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try StrictJSONParser.parse(Array(text.utf8))
    }

    private func rejects(_ bytes: [UInt8]) -> JSONParseError? {
        do {
            _ = try StrictJSONParser.parse(bytes)
            return nil
        } catch {
            return error
        }
    }

    @Test("accepts every JSON value kind with whitespace around tokens")
    func acceptsValues() throws {
        let value = try parse(
            " \t\r\n{ \"a\" : [ 1 , -2 , 0 , 1.5 , -0.25e+3 , true , false , null , \"s\" , { } , [ ] ] }\n"
        )
        guard case .object(let object) = value, case .array(let elements)? = object["a"] else {
            Issue.record("expected an object with an array, got \(value)")
            return
        }
        #expect(
            elements == [
                .number(JSONNumber(isInteger: true, integerValue: 1)),
                .number(JSONNumber(isInteger: true, integerValue: -2)),
                .number(JSONNumber(isInteger: true, integerValue: 0)),
                .number(JSONNumber(isInteger: false, integerValue: nil)),
                .number(JSONNumber(isInteger: false, integerValue: nil)),
                .bool(true), .bool(false), .null, .string("s"),
                .object(JSONObject(members: [], byteRange: 72..<75)),
                .array([]),
            ]
        )
    }

    @Test("reads 64-bit integers exactly, and flags the ones that do not fit")
    func integerRange() throws {
        #expect(try parse("9223372036854775807") == .number(JSONNumber(isInteger: true, integerValue: .max)))
        #expect(try parse("-9223372036854775808") == .number(JSONNumber(isInteger: true, integerValue: .min)))
        #expect(try parse("9223372036854775808") == .number(JSONNumber(isInteger: true, integerValue: nil)))
        #expect(try parse("-9223372036854775809") == .number(JSONNumber(isInteger: true, integerValue: nil)))
        #expect(try parse("12345678901234567890123") == .number(JSONNumber(isInteger: true, integerValue: nil)))
        #expect(try parse("-0") == .number(JSONNumber(isInteger: true, integerValue: 0)))
        #expect(try parse("1.0") == .number(JSONNumber(isInteger: false, integerValue: nil)))
        #expect(try parse("1e3") == .number(JSONNumber(isInteger: false, integerValue: nil)))
        #expect(try parse("1E-3") == .number(JSONNumber(isInteger: false, integerValue: nil)))
    }

    @Test(
        "decodes string escapes and unicode",
        arguments: [
            (#""plain""#, "plain"),
            (#""a\"b\\c\/d""#, "a\"b\\c/d"),
            (#""\b\f\n\r\t""#, "\u{08}\u{0C}\n\r\t"),
            (#""\u00e9t\u00C9""#, "étÉ"),
            (#""\ud83d\ude00""#, "😀"),
            (#""\u0000""#, "\u{0}"),
            ("\"été 😀\"", "été 😀"),
            (#""mixed é \u00e9 😀""#, "mixed é é 😀"),
        ]
    )
    func stringEscapes(json: String, expected: String) throws {
        #expect(try parse(json) == .string(expected))
    }

    @Test(
        "rejects what RFC 8259 does not allow",
        arguments: [
            "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "{'a':1}", "01", "-", "1.", ".5", "1e",
            "+1", "NaN", "Infinity", "tru", "nul", "falsey", "\"unterminated", "\"bad \\x escape\"", "\"\\u12\"",
            "\"\\u12G4\"", "\"\\ud83d\"", "\"\\ud83d\\u0041\"", "\"\\ude00\"", "{} {}", "{}x", "[1] 2", "// c\n{}",
            "{\"a\":1}/*c*/", "\u{FEFF}{}",
        ]
    )
    func rejectsMalformed(json: String) {
        #expect(rejects(Array(json.utf8))?.kind == .malformed, "should reject \(json.debugDescription)")
    }

    @Test("rejects raw control characters and invalid UTF-8 in strings")
    func rejectsBadBytes() {
        #expect(rejects(Array("\"a\nb\"".utf8))?.kind == .malformed)
        #expect(rejects(Array("\"a\tb\"".utf8))?.kind == .malformed)
        #expect(rejects([0x22, 0xC3, 0x28, 0x22])?.kind == .malformed)  // invalid 2-byte sequence
        #expect(rejects([0x22, 0xED, 0xA0, 0x80, 0x22])?.kind == .malformed)  // UTF-8-encoded surrogate
        #expect(rejects([0x22, 0x5C, 0x6E, 0xFF, 0x22])?.kind == .malformed)  // after an escape
        #expect(rejects([0x7B, 0x7D, 0x00])?.kind == .malformed)  // NUL after the value
    }

    @Test("rejects duplicate keys at every level and names the top-level field")
    func duplicateKeys() {
        let root = rejects(Array(#"{"a":1,"b":2,"a":3}"#.utf8))
        #expect(root?.kind == .duplicateKey("a"))
        #expect(root?.topLevelKey == "a")
        let nested = rejects(Array(#"{"payload":{"aps":{"alert":"x","alert":"y"}}}"#.utf8))
        #expect(nested?.kind == .duplicateKey("alert"))
        #expect(nested?.topLevelKey == "payload")
        #expect(nested?.path == ["payload", "aps", "alert"])
        // Arrays add nothing to the path.
        #expect(rejects(Array(#"{"p":{"l":[{"k":1,"k":2}]}}"#.utf8))?.path == ["p", "l", "k"])
        // Keys equal after unescaping are the same key.
        #expect(rejects(Array(#"{"a":1,"\u0061":2}"#.utf8))?.kind == .duplicateKey("a"))
        // Large objects use a set: still detected.
        let many = (0..<40).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        #expect(rejects(Array("{\(many),\"k7\":0}".utf8))?.kind == .duplicateKey("k7"))
        #expect(throws: Never.self) { try StrictJSONParser.parse(Array("{\(many)}".utf8)) }
    }

    @Test("bounds nesting depth")
    func depth() {
        let ok =
            String(repeating: "[", count: StrictJSONParser.maximumDepth)
            + String(repeating: "]", count: StrictJSONParser.maximumDepth)
        #expect(throws: Never.self) { try StrictJSONParser.parse(Array(ok.utf8)) }
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(rejects(Array(deep.utf8))?.kind == .tooDeep)
    }

    @Test("records the byte range of objects")
    func byteRanges() throws {
        let text = #"{"x": 1, "payload" : { "a" : [0.1, {}] } }"#
        guard case .object(let root) = try parse(text), case .object(let payload)? = root["payload"] else {
            Issue.record("expected objects")
            return
        }
        let bytes = Array(text.utf8)
        #expect(String(decoding: bytes[payload.byteRange], as: UTF8.self) == #"{ "a" : [0.1, {}] }"#)
        #expect(root.byteRange == 0..<bytes.count)
    }
}
