import NIOCore
import NIOHPACK
import Testing

@testable import APNsHTTP2

/// The reader may only take blocks that leave the HPACK table alone, and must then read what NIO's
/// `HPACKDecoder` would. NIO's encoder and decoder are the oracle.
@Suite("HPACK answer reader")
struct HPACKAnswerReaderTests {
    typealias Fields = HPACKAnswerReader.Fields

    /// What the connection handler takes from a decoded header list.
    func fields(of headers: HPACKHeaders) -> Fields {
        var fields = Fields()
        for (name, value, _) in headers {
            switch name {
            case ":status":
                fields.hasStatus = true
                fields.status = Int(value)
            case "apns-id": fields.apnsID = ByteBuffer(string: value)
            case "apns-unique-id": fields.apnsUniqueID = value
            default: continue
            }
        }
        return fields
    }

    func read(_ bytes: [UInt8]) -> Fields? {
        HPACKAnswerReader.read(ByteBuffer(bytes: bytes), maximumHeaderListSize: HPACKDecoder.defaultMaxHeaderListSize)
    }

    func literal(_ string: String) -> [UInt8] {
        [UInt8(string.utf8.count)] + Array(string.utf8)
    }

    let uuid = "6a5f3b1c-0d4e-4f2a-9b8c-7d6e5f4a3b2c"

    @Test("haproxy's 200: `:status` as static index 8, `apns-id` as a literal without indexing")
    func statelessOK() throws {
        let fields = try #require(read([0x88, 0x00] + literal("apns-id") + literal(uuid)))
        #expect(fields.hasStatus)
        #expect(fields.status == 200)
        #expect(fields.apnsID == ByteBuffer(string: uuid))
        #expect(fields.apnsUniqueID == nil)
    }

    @Test(
        "an error answer: `:status` as a never-indexed literal with an indexed name, `apns-unique-id`, other fields skipped"
    )
    func statelessError() throws {
        let bytes: [UInt8] =
            [0x18] + literal("410") + [0x10] + literal("apns-unique-id") + literal(uuid) + [0x0f, 0x10]
            + literal("application/json")
            + [0x00] + literal("apns-id") + literal(uuid)
        let fields = try #require(read(bytes))
        #expect(fields == Fields(hasStatus: true, status: 410, apnsID: ByteBuffer(string: uuid), apnsUniqueID: uuid))
        // A status that is not a number is a status without a value, as with `Int(String)`.
        #expect(read([0x08] + literal("2x0")) == Fields(hasStatus: true, status: nil))
        #expect(read([]) == Fields())
    }

    @Test("haproxy's `content-length: 0` with incremental indexing: read here, and handed over for the decoder's table")
    func insertions() throws {
        let insertion: [UInt8] = [0x5c] + literal("0")
        let fields = try #require(read([0x88, 0x00] + literal("apns-id") + literal(uuid) + insertion))
        #expect(fields.status == 200)
        #expect(fields.apnsID == ByteBuffer(string: uuid))
        #expect(fields.tableInsertions == ByteBuffer(bytes: insertion))
        // A run of two, with a literal name.
        let run: [UInt8] = [0x40] + literal("apns-id") + literal(uuid) + insertion
        #expect(try #require(read([0x88] + run)).tableInsertions == ByteBuffer(bytes: run))
        #expect(try #require(read([0x88] + run)).apnsID == ByteBuffer(string: uuid))
        #expect(read([0x88] + literal("x")) == nil, "not a field")
        #expect(read(insertion + [0x88] + insertion) == nil, "insertions apart")
        #expect(read([0x88, 0x40]) == nil, "truncated")
        #expect(read([0x7f, 0x00] + literal("0")) == nil, "name index 63 (dynamic)")
    }

    @Test("blocks that depend on the dynamic table, use Huffman, or are malformed are left to the decoder")
    func declines() {
        #expect(read([0x3f, 0xe1, 0x1f, 0x88]) == nil, "table size update")
        #expect(read([0x88, 0xbe]) == nil, "dynamic index 62")
        #expect(read([0x80]) == nil, "index 0")
        #expect(read([0x0f, 0x34] + literal("x")) == nil, "name index 67 (dynamic)")
        #expect(
            read([0x00, 0x87, 0x1d, 0xa9, 0x9c, 0xf6, 0x1b, 0x0d, 0x9d] + literal(uuid)) == nil,
            "Huffman-coded name"
        )
        #expect(read([0x00] + literal("apns-id") + [0x80 | 3, 1, 2, 3]) == nil, "Huffman-coded value")
        #expect(read([0x00] + literal("apns-id") + [36] + Array(uuid.utf8.prefix(10))) == nil, "truncated value")
        #expect(read([0x00, 0x00] + literal(uuid)) == nil, "empty literal name")
        #expect(read([0x88, 0x00, 0x7f]) == nil, "truncated length")
        #expect(read([0x88, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]) == nil, "oversized integer")
        let big = String(repeating: "v", count: 600)
        var many: [UInt8] = []
        // 600 = 127 + 89 + 3 * 128 (RFC 7541 §5.1).
        for _ in 0..<30 { many += [0x00] + literal("x-padding") + [0x7f, 0x80 | 89, 3] + Array(big.utf8) }
        #expect(
            HPACKAnswerReader.read(ByteBuffer(bytes: many), maximumHeaderListSize: 16_384) == nil,
            "list above the decoder's limit"
        )
        #expect(
            HPACKAnswerReader.read(ByteBuffer(bytes: many), maximumHeaderListSize: 1 << 20) != nil,
            "the same list under a higher limit"
        )
    }

    @Test("a string that is not ASCII is left to the decoder, which counts it as UTF-8 text (found by fuzzing)")
    func declinesNonASCII() throws {
        // 0x9a is not UTF-8: the decoder reads it as U+FFFD, three bytes, so its header list is larger than
        // the bytes on the wire. With a limit between the two sizes, the decoder refuses the block.
        let value = [UInt8](repeating: 0x9a, count: 40)
        // :status 200, then a literal named transfer-encoding (static 57).
        let block = [0x88, 0x0f, 0x2a] + [UInt8(value.count)] + value
        let limit = 32 + 7 + 3 + 32 + 40 + 20
        var decoder = HPACKDecoder(
            allocator: ByteBufferAllocator(),
            maxDynamicTableSize: 4096,
            maxHeaderListSize: limit
        )
        var bytes = ByteBuffer(bytes: block)
        #expect(throws: (any Error).self) { try decoder.decodeHeaders(from: &bytes) }
        #expect(HPACKAnswerReader.read(ByteBuffer(bytes: block), maximumHeaderListSize: limit) == nil)
        #expect(read([0x88, 0x00] + literal("x-note") + [2, 0xc3, 0xa9]) == nil, "valid UTF-8, not ASCII")
    }

    /// SplitMix64, so that a failure replays.
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9e37_79b9_7f4a_7c15
            var z = state
            z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
            z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
            return z ^ (z >> 31)
        }
    }

    /// Each block goes to a decoder that sees every block (the reference) and, as in the connection
    /// handler, to a second decoder: whole when the reader declines it, only its table insertions when
    /// the reader takes it. If the reader ever took a block whose effect on the table it did not hand
    /// over, the second decoder would fall out of step and decode later blocks (which refer to dynamic
    /// entries) differently.
    @Test(
        "thousands of random answers from NIO's encoder: the reader agrees with the decoder, and the handler's decoder stays in step",
        arguments: [false, true]
    )
    func oracle(huffman: Bool) throws {
        var random = SeededGenerator(state: huffman ? 11 : 12)
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator(), useHuffmanEncoding: huffman)
        var reference = HPACKDecoder(allocator: ByteBufferAllocator())
        var handlers = HPACKDecoder(allocator: ByteBufferAllocator())
        let statuses = ["200", "200", "200", "400", "403", "404", "410", "413", "429", "500", "503", "204"]
        let indexings: [HPACKIndexing] = [.indexable, .nonIndexable, .neverIndexed]
        let ids = (0..<8).map { "0000000\($0)-0000-4000-8000-00000000000\($0)" }
        var taken = 0
        var declined = 0
        var stateless = false
        for round in 0..<3_000 {
            if round % 150 == 0 {
                // Phases: an encoder that indexes (and refers back to) fields, then one that never
                // does, starting from an emptied table (two size updates in the next block).
                stateless.toggle()
                if stateless {
                    try encoder.setDynamicTableSize(0)
                    try encoder.setDynamicTableSize(4096)
                }
            } else if !stateless, random.next() % 50 == 0 {
                try encoder.setDynamicTableSize([0, 64, 256, 4096][Int(random.next() % 4)])
            }
            var headers = HPACKHeaders()
            func indexing() -> HPACKIndexing {
                stateless ? indexings[1 + Int(random.next() % 2)] : indexings[Int(random.next() % 3)]
            }
            headers.add(
                name: ":status",
                value: statuses[Int(random.next() % UInt64(statuses.count))],
                indexing: indexing()
            )
            if random.next() % 5 != 0 {
                headers.add(name: "apns-id", value: ids[Int(random.next() % UInt64(ids.count))], indexing: indexing())
            }
            if random.next() % 10 == 0 {
                headers.add(name: "apns-unique-id", value: ids[Int(random.next() % 3)], indexing: indexing())
            }
            if random.next() % 4 == 0 {
                headers.add(name: "content-type", value: "application/json", indexing: indexing())
            }
            if random.next() % 6 == 0 { headers.add(name: "server", value: "stand-in", indexing: indexing()) }
            if random.next() % 20 == 0 {
                headers.add(name: ":status", value: statuses[Int(random.next() % 3)], indexing: indexing())
            }

            var block = ByteBuffer()
            try encoder.encode(headers: headers, to: &block)
            var referenceBlock = block
            let decoded = try reference.decodeHeaders(from: &referenceBlock)
            #expect(decoded.map { "\($0.name): \($0.value)" } == headers.map { "\($0.name): \($0.value)" })
            if let fields = HPACKAnswerReader.read(block, maximumHeaderListSize: handlers.maxHeaderListSize) {
                taken += 1
                var fromDecoder = self.fields(of: decoded)
                fromDecoder.tableInsertions = fields.tableInsertions
                #expect(fields == fromDecoder)
                if var insertions = fields.tableInsertions { _ = try handlers.decodeHeaders(from: &insertions) }
            } else {
                declined += 1
                var handlersBlock = block
                let viaHandlers = try handlers.decodeHeaders(from: &handlersBlock)
                #expect(viaHandlers.map { "\($0.name): \($0.value)" } == decoded.map { "\($0.name): \($0.value)" })
            }
        }
        if huffman {
            // NIO Huffman-codes every literal string: only blocks of static indices alone are taken.
            #expect(taken > 10)
            #expect(declined > 2_000)
        } else {
            #expect(taken > 1_000)
            #expect(declined > 500)
        }
    }
}
