import DequeModule
public import NIOCore

/// HPACK (RFC 7541) for the requests an APNs client sends, with the encoder's dynamic table modelled
/// exactly, so that a notification's shared header block can be encoded once and reused byte for byte.
///
/// Apple's advice for providers sending many streams: `:path` and `authorization` as literals without
/// indexing (they change per request and per hour), the other headers indexed. Once a notification's
/// shared headers (`:authority`, `apns-topic`, `apns-push-type`, ...) are in the table, encoding them
/// yields the same bytes for every device until the table changes; ``generation`` says when it did.
/// No Huffman coding: it would save about a quarter of the bytes of a header block that is sent once
/// per connection, and cost CPU on the literals sent every time.
public struct HPACKRequestEncoder {
    private struct Entry {
        var name: String
        var value: String
        var size: Int
    }

    /// What we allow ourselves: never more than the peer's SETTINGS_HEADER_TABLE_SIZE.
    public private(set) var maximumTableSize: Int
    /// Newest first: HPACK index 62 is `entries[0]`.
    private var entries: Deque<Entry> = []
    private var tableSize = 0
    /// A size change the peer has not been told about yet (RFC 7541 §4.2: at the start of the next block).
    private var pendingSizeUpdate: Int?
    /// Changes whenever the table does; a block encoded at one generation is valid until it changes.
    public private(set) var generation: UInt64 = 0

    /// The ceiling we use even if the peer allows more: APNs answers' decoder, and most servers', stay at the default.
    public static let preferredTableSize = HTTP2Wire.defaultHeaderTableSize

    public init() {
        maximumTableSize = Self.preferredTableSize
    }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE arrived.
    public mutating func peerAllowsTableSize(_ peerMaximum: Int) {
        let newSize = min(peerMaximum, Self.preferredTableSize)
        guard newSize != maximumTableSize else { return }
        maximumTableSize = newSize
        pendingSizeUpdate = min(pendingSizeUpdate ?? newSize, newSize)
        evict(toFit: 0)
        generation &+= 1
    }

    /// Call at the start of every header block.
    public mutating func writePendingSizeUpdate(into buffer: inout ByteBuffer) {
        guard let size = pendingSizeUpdate else { return }
        pendingSizeUpdate = nil
        Self.writeInteger(size, prefixBits: 5, firstByteFlags: 0x20, into: &buffer)
    }

    /// Encodes a field that repeats across requests: indexed when the table has it, otherwise a
    /// literal with incremental indexing (inserting it).
    public mutating func writeIndexable(name: String, value: String, into buffer: inout ByteBuffer) {
        if let index = Self.staticFullMatch(name: name, value: value) ?? dynamicIndex(name: name, value: value) {
            Self.writeInteger(index, prefixBits: 7, firstByteFlags: 0x80, into: &buffer)
            return
        }
        if let nameIndex = Self.staticNameIndex(name) ?? dynamicNameIndex(name) {
            Self.writeInteger(nameIndex, prefixBits: 6, firstByteFlags: 0x40, into: &buffer)
        } else {
            buffer.writeInteger(0x40 as UInt8)
            Self.writeString(name, into: &buffer)
        }
        Self.writeString(value, into: &buffer)
        insert(name: name, value: value)
    }

    /// A literal without indexing whose name is in the static table (`:path` is 4, `authorization` 23).
    public static func writeNotIndexed(staticNameIndex: Int, value: String, into buffer: inout ByteBuffer) {
        writeInteger(staticNameIndex, prefixBits: 4, firstByteFlags: 0x00, into: &buffer)
        writeString(value, into: &buffer)
    }

    /// `:path` as `/3/device/<hex>` without building the string.
    public static func writePath(deviceHex: String, into buffer: inout ByteBuffer) {
        writeInteger(StaticName.path, prefixBits: 4, firstByteFlags: 0x00, into: &buffer)
        let prefix = "/3/device/"
        writeInteger(prefix.utf8.count + deviceHex.utf8.count, prefixBits: 7, firstByteFlags: 0x00, into: &buffer)
        buffer.writeString(prefix)
        buffer.writeString(deviceHex)
    }

    /// A literal without indexing with a literal name (`apns-id`, per request).
    public static func writeNotIndexed(name: String, value: String, into buffer: inout ByteBuffer) {
        buffer.writeInteger(0x00 as UInt8)
        writeString(name, into: &buffer)
        writeString(value, into: &buffer)
    }

    public enum StaticName {
        public static let authority = 1
        public static let path = 4
        public static let authorization = 23
    }

    // MARK: Table

    private func dynamicIndex(name: String, value: String) -> Int? {
        for (offset, entry) in entries.enumerated() where entry.name == name && entry.value == value {
            return Self.staticTable.count + 1 + offset
        }
        return nil
    }

    private func dynamicNameIndex(_ name: String) -> Int? {
        for (offset, entry) in entries.enumerated() where entry.name == name {
            return Self.staticTable.count + 1 + offset
        }
        return nil
    }

    private mutating func insert(name: String, value: String) {
        // RFC 7541 §4.1: an entry's size is its name and value in octets plus 32.
        let size = name.utf8.count + value.utf8.count + 32
        generation &+= 1
        guard size <= maximumTableSize else {
            // §4.4: an entry larger than the table empties it and is not added.
            entries.removeAll()
            tableSize = 0
            return
        }
        evict(toFit: size)
        entries.prepend(Entry(name: name, value: value, size: size))
        tableSize += size
    }

    private mutating func evict(toFit size: Int) {
        while tableSize + size > maximumTableSize, let oldest = entries.popLast() {
            tableSize -= oldest.size
        }
    }

    // MARK: Primitives

    /// RFC 7541 §5.1.
    public static func writeInteger(
        _ value: Int,
        prefixBits: Int,
        firstByteFlags: UInt8,
        into buffer: inout ByteBuffer
    ) {
        let limit = (1 << prefixBits) - 1
        if value < limit {
            buffer.writeInteger(firstByteFlags | UInt8(value))
            return
        }
        buffer.writeInteger(firstByteFlags | UInt8(limit))
        var rest = value - limit
        while rest >= 128 {
            buffer.writeInteger(UInt8(rest & 0x7f | 0x80))
            rest >>= 7
        }
        buffer.writeInteger(UInt8(rest))
    }

    /// RFC 7541 §5.2, raw octets (H = 0).
    public static func writeString(_ string: String, into buffer: inout ByteBuffer) {
        writeInteger(string.utf8.count, prefixBits: 7, firstByteFlags: 0x00, into: &buffer)
        buffer.writeString(string)
    }

    private static func staticFullMatch(name: String, value: String) -> Int? {
        switch (name, value) {
        case (":method", "GET"): return 2
        case (":method", "POST"): return 3
        case (":path", "/"): return 4
        case (":scheme", "http"): return 6
        case (":scheme", "https"): return 7
        case ("accept-encoding", "gzip, deflate"): return 16
        default: return nil
        }
    }

    private static func staticNameIndex(_ name: String) -> Int? {
        staticNameIndices[name]
    }

    /// RFC 7541 Appendix A, names only (the few entries with values are matched above).
    public static let staticTable: [String] = [
        ":authority", ":method", ":method", ":path", ":path", ":scheme", ":scheme", ":status", ":status", ":status",
        ":status", ":status", ":status", ":status", "accept-charset", "accept-encoding", "accept-language",
        "accept-ranges", "accept", "access-control-allow-origin", "age", "allow", "authorization", "cache-control",
        "content-disposition", "content-encoding", "content-language", "content-length", "content-location",
        "content-range", "content-type", "cookie", "date", "etag", "expect", "expires", "from", "host", "if-match",
        "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified", "link", "location",
        "max-forwards", "proxy-authenticate", "proxy-authorization", "range", "referer", "refresh", "retry-after",
        "server", "set-cookie", "strict-transport-security", "transfer-encoding", "user-agent", "vary", "via",
        "www-authenticate",
    ]

    private static let staticNameIndices: [String: Int] = {
        var indices: [String: Int] = [:]
        for (offset, name) in staticTable.enumerated() where indices[name] == nil { indices[name] = offset + 1 }
        return indices
    }()
}
