package import NIOCore
import PushTransport

/// Reads what an APNs client needs from an answer's header block (`:status`, `apns-id`,
/// `apns-unique-id`) without building a header list, for the blocks whose meaning does not depend on
/// the HPACK dynamic table.
///
/// Nearly every answer is `:status: 200` plus an `apns-id`; haproxy, for one, sends a static index,
/// a literal `apns-id` without indexing and `content-length: 0` with incremental indexing. Decoding
/// such a block with `HPACKDecoder` builds an array and a String per field, then the handler compares
/// names as Strings: about a tenth of the client's CPU per notification.
///
/// A block made only of static-table indices and literals (static or literal names, no Huffman-coded
/// string), with no table size update, reads the same whatever the dynamic table holds. Its only
/// effect on the table is to insert its literals with incremental indexing (RFC 7541 §6.2.1), in
/// order; ``Fields/tableInsertions`` holds exactly those bytes, and the caller must give them to its
/// `HPACKDecoder` so that the decoder's table changes as the server's encoder's did. Anything else (a
/// dynamic index, a size update, a Huffman string, insertions not in one run, a malformed or oversized
/// block) yields nil: the caller decodes the whole block with `HPACKDecoder`, which also reports what
/// is malformed.
package enum HPACKAnswerReader {
    /// The fields the client reads. The `apns-id` stays bytes (a slice of the block) so the caller can
    /// reuse a String it already has for the same id.
    package struct Fields: Equatable {
        /// Whether the block had a `:status` field at all (the last one counts, as in a decoded list).
        package var hasStatus = false
        /// Nil when `:status` was not a decimal number.
        package var status: Int?
        package var apnsID: ByteBuffer?
        package var apnsUniqueID: String?
        /// The block's literals with incremental indexing, one run of them: for the caller's decoder.
        package var tableInsertions: ByteBuffer?
    }

    /// - Parameter maximumHeaderListSize: the decoder's limit; a larger list is left to the decoder to reject.
    package static func read(_ block: ByteBuffer, maximumHeaderListSize: Int) -> Fields? {
        var fields = Fields()
        var listSize = 0
        var bytes = block
        var insertions: Range<Int>? = nil
        while let first = bytes.getInteger(at: bytes.readerIndex, as: UInt8.self) {
            let fieldStart = bytes.readerIndex
            let nameLength: Int
            let valueLength: Int
            if first & 0x80 != 0 {
                // §6.1 indexed field: only the static table's entries are known without the decoder.
                guard let index = readInteger(prefixBits: 7, from: &bytes), index >= 1, index <= staticTableCount else {
                    return nil
                }
                if let status = staticStatus(index) {
                    fields.hasStatus = true
                    fields.status = status
                }
                nameLength = staticNameLength(index)
                valueLength = staticValueLength(index)
            } else if first & 0xe0 == 0x00 || first & 0xc0 == 0x40 {
                // §6.2.2 without indexing (0000xxxx), §6.2.3 never indexed (0001xxxx), §6.2.1 with
                // incremental indexing (01xxxxxx).
                let indexing = first & 0xc0 == 0x40
                guard let nameIndex = readInteger(prefixBits: indexing ? 6 : 4, from: &bytes) else { return nil }
                let name: Name
                if nameIndex == 0 {
                    guard let literal = readRawString(from: &bytes), literal.readableBytes > 0 else { return nil }
                    name = Name(literal)
                    nameLength = literal.readableBytes
                } else {
                    guard nameIndex <= staticTableCount else { return nil }
                    name = staticStatus(nameIndex) != nil ? .status : .other
                    nameLength = staticNameLength(nameIndex)
                }
                guard let value = readRawString(from: &bytes) else { return nil }
                valueLength = value.readableBytes
                if indexing {
                    if let run = insertions {
                        // Fields in between would have to be cut out; rare enough to leave to the decoder.
                        guard run.upperBound == fieldStart else { return nil }
                        insertions = run.lowerBound..<bytes.readerIndex
                    } else {
                        insertions = fieldStart..<bytes.readerIndex
                    }
                }
                switch name {
                case .status:
                    fields.hasStatus = true
                    fields.status = Int(String(decoding: value.readableBytesView, as: UTF8.self))
                case .apnsID:
                    fields.apnsID = value
                case .apnsUniqueID:
                    fields.apnsUniqueID = String(decoding: value.readableBytesView, as: UTF8.self)
                case .other:
                    break
                }
            } else {
                // §6.3 a table size update (001xxxxx).
                return nil
            }
            listSize += nameLength + valueLength + 32
            guard listSize <= maximumHeaderListSize else { return nil }
        }
        if let insertions {
            fields.tableInsertions = block.getSlice(at: insertions.lowerBound, length: insertions.count)
        }
        return fields
    }

    private enum Name {
        case status, apnsID, apnsUniqueID, other

        init(_ literal: ByteBuffer) {
            self = literal.withUnsafeReadableBytes { bytes in
                func equals(_ name: StaticString) -> Bool {
                    name.withUTF8Buffer { $0.count == bytes.count && $0.elementsEqual(bytes) }
                }
                switch bytes.count {
                case 7: return equals("apns-id") ? .apnsID : equals(":status") ? .status : .other
                case 14: return equals("apns-unique-id") ? .apnsUniqueID : .other
                default: return .other
                }
            }
        }
    }

    /// RFC 7541 §5.1, for the small values an answer has; nil for anything longer than three
    /// continuation bytes (the decoder then judges it) or for a truncated integer.
    private static func readInteger(prefixBits: Int, from bytes: inout ByteBuffer) -> Int? {
        guard let first = bytes.readInteger(as: UInt8.self) else { return nil }
        let limit = (1 << prefixBits) - 1
        var value = Int(first) & limit
        guard value == limit else { return value }
        var shift = 0
        while shift <= 14 {
            guard let byte = bytes.readInteger(as: UInt8.self) else { return nil }
            value += Int(byte & 0x7f) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        return nil
    }

    /// §5.2 with H = 0: the string's bytes as a slice; nil for a Huffman-coded or truncated string, and
    /// for one that is not ASCII: the decoder reads strings as UTF-8 text and counts the header list in
    /// those bytes (an invalid byte becomes a three-byte replacement), so only for ASCII do its sizes and
    /// ours agree. APNs answers are ASCII; anything else is left to the decoder.
    private static func readRawString(from bytes: inout ByteBuffer) -> ByteBuffer? {
        guard let first = bytes.getInteger(at: bytes.readerIndex, as: UInt8.self), first & 0x80 == 0,
            let length = readInteger(prefixBits: 7, from: &bytes),
            let string = bytes.readSlice(length: length),
            !string.readableBytesView.contains(where: { $0 >= 0x80 })
        else { return nil }
        return string
    }

    // MARK: Static table (RFC 7541 Appendix A)

    static var staticTableCount: Int { HPACKRequestEncoder.staticTable.count }

    /// Static entries 8 to 14 are `:status` with 200, 204, 206, 304, 400, 404, 500.
    private static func staticStatus(_ index: Int) -> Int? {
        switch index {
        case 8: 200
        case 9: 204
        case 10: 206
        case 11: 304
        case 12: 400
        case 13: 404
        case 14: 500
        default: nil
        }
    }

    private static func staticNameLength(_ index: Int) -> Int {
        HPACKRequestEncoder.staticTable[index - 1].utf8.count
    }

    /// The entries with a value; all others have an empty one.
    private static func staticValueLength(_ index: Int) -> Int {
        switch index {
        case 2: 3  // :method GET
        case 3: 4  // :method POST
        case 4: 1  // :path /
        case 5: 11  // :path /index.html
        case 6: 4  // :scheme http
        case 7: 5  // :scheme https
        case 8...14: 3  // :status
        case 16: 13  // accept-encoding gzip, deflate
        default: 0
        }
    }
}
