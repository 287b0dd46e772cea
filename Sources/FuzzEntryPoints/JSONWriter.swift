import PushgateCore

/// Writes a ``JSONValue`` back as JSON text, for the round trips (parse, write, parse again: equal).
///
/// A ``JSONNumber`` keeps only its class and its 64-bit value, so a number is written as a literal of
/// the same class: its value, a 20-digit integer that overflows 64 bits, or `0.5`.
enum JSONWriter {
    static func write(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        write(value, into: &out)
        return out
    }

    static func write(_ value: JSONValue, into out: inout [UInt8]) {
        switch value {
        case .null: out += Array("null".utf8)
        case .bool(let flag): out += Array((flag ? "true" : "false").utf8)
        case .number(let number):
            let literal =
                if !number.isInteger { "0.5" } else if let exact = number.integerValue { String(exact) } else {
                    "99999999999999999999"
                }
            out += Array(literal.utf8)
        case .string(let text): writeString(text, into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                write(element, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            let members = object.members.map { member in
                (member.key, { (out: inout [UInt8]) in write(member.value, into: &out) })
            }
            writeObject(members, into: &out)
        }
    }

    /// An object of the given members, in order; each value written by its closure.
    static func writeObject(_ members: [(String, (inout [UInt8]) -> Void)], into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        for (index, (key, writeValue)) in members.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            writeString(key, into: &out)
            out.append(UInt8(ascii: ":"))
            writeValue(&out)
        }
        out.append(UInt8(ascii: "}"))
    }

    static func writeString(_ text: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                out += [UInt8(ascii: "\\"), byte]
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xf)]]
            default:
                out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    static func writeStrings(_ texts: [String], into out: inout [UInt8]) {
        write(.array(texts.map(JSONValue.string)), into: &out)
    }
}

extension JSONValue {
    /// Equality of content: objects compared by their members, not by where they were in the input.
    func sameContent(as other: JSONValue) -> Bool {
        switch (self, other) {
        case (.array(let lhs), .array(let rhs)):
            return lhs.count == rhs.count && zip(lhs, rhs).allSatisfy { $0.sameContent(as: $1) }
        case (.object(let lhs), .object(let rhs)):
            return lhs.members.count == rhs.members.count
                && zip(lhs.members, rhs.members).allSatisfy { $0.key == $1.key && $0.value.sameContent(as: $1.value) }
        case (.array, _), (.object, _):
            return false
        default:
            return self == other
        }
    }
}
