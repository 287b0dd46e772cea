/// The one spelling of a request path the API accepts. Pure: the string in, the first problem out.
///
/// Why: a router, a reverse proxy and a key check that read one path differently are an authorisation
/// bypass (`//v1/...` once reached a handler that the key check thought was outside `/v1`). Servers and
/// proxies normalise in different ways (empty segments, dot segments, `%2e`, `%76`, `;` parameters,
/// backslashes), so the API takes only the form that every one of them reads alike, and refuses the
/// rest with 400 `non_canonical_path` before any route runs. A route literal (`v1`, `apps`, `groups`,
/// ...) can then be written one way only; a parameter may still carry any character percent-encoded.
package enum CanonicalPath {
    /// Nil when `path` is canonical; else what is wrong with it, for the error message.
    ///
    /// Canonical: starts with `/`; no empty segment (no `//`, no trailing `/` except the root); no `.` or
    /// `..` segment; every byte is an RFC 3986 `pchar` other than `;` (`A-Z a-z 0-9 - . _ ~ ! $ & ' ( ) * +
    /// , = : @`) or a `%` with two hex digits; a percent-encoded octet is never an unreserved character
    /// (those have one spelling: themselves).
    package static func problem(of path: String) -> String? {
        let bytes = Array(path.utf8)
        guard bytes.first == UInt8(ascii: "/") else { return "the path must start with /" }
        if bytes.count == 1 { return nil }
        var segmentStart = 1
        var index = 1
        while index <= bytes.count {
            if index == bytes.count || bytes[index] == UInt8(ascii: "/") {
                let segment = bytes[segmentStart..<index]
                if segment.isEmpty { return "the path has an empty segment (// or a trailing /)" }
                if segment.elementsEqual(".".utf8) || segment.elementsEqual("..".utf8) {
                    return "the path has a dot segment"
                }
                segmentStart = index + 1
                index += 1
                continue
            }
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, let high = hexValue(bytes[index + 1]),
                    let low = hexValue(bytes[index + 2])
                else { return "the path has a % that is not followed by two hex digits" }
                if isUnreserved(high << 4 | low) {
                    return "the path percent-encodes a character that needs no encoding"
                }
                index += 3
                continue
            }
            guard isPathCharacter(byte) else {
                return byte == UInt8(ascii: ";")
                    ? "the path has a ; (encode it as %3B)" : "the path has a character that must be percent-encoded"
            }
            index += 1
        }
        return nil
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// RFC 3986 unreserved: `ALPHA DIGIT - . _ ~`.
    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
                || byte == UInt8(ascii: "~")
        }
    }

    /// A literal `pchar` byte, less `;` (a path parameter to some servers and proxies).
    private static func isPathCharacter(_ byte: UInt8) -> Bool {
        isUnreserved(byte) || "!$&'()*+,=:@".utf8.contains(byte)
    }
}
