import NIOCore
import NIOHPACK
import Testing

@testable import APNsHTTP2
@testable import PushTransport

/// The encoder's model of the dynamic table must match a real decoder's, block after block; NIO's
/// `HPACKDecoder` is the oracle.
@Suite("HPACK request encoder")
struct HPACKRequestEncoderTests {
    typealias Field = (name: String, value: String)

    func encode(
        _ shared: [Field],
        path: String,
        authorization: String?,
        encoder: inout HPACKRequestEncoder
    ) -> ByteBuffer {
        var block = ByteBuffer()
        encoder.writePendingSizeUpdate(into: &block)
        block.writeInteger(0x83 as UInt8)
        block.writeInteger(0x87 as UInt8)
        HPACKRequestEncoder.writePath(deviceHex: path, into: &block)
        for field in shared { encoder.writeIndexable(name: field.name, value: field.value, into: &block) }
        if let authorization {
            HPACKRequestEncoder.writeNotIndexed(
                staticNameIndex: HPACKRequestEncoder.StaticName.authorization,
                value: authorization,
                into: &block
            )
        }
        return block
    }

    func decoded(_ block: ByteBuffer, decoder: inout HPACKDecoder) throws -> [String] {
        var block = block
        let headers = try decoder.decodeHeaders(from: &block)
        #expect(block.readableBytes == 0)
        return headers.map { "\($0.name): \($0.value)" }
    }

    let apnsFields: [Field] = [
        (":authority", "api.push.apple.com"), ("apns-push-type", "alert"), ("apns-topic", "com.example.app"),
        ("apns-priority", "10"), ("apns-expiration", "0"), ("content-type", "application/json"),
    ]

    @Test("blocks decode to exactly the fields, and the shared part shrinks to indices after the first")
    func repeatedRequests() throws {
        var encoder = HPACKRequestEncoder()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        let authorization = "bearer " + String(repeating: "j", count: 230)
        var sizes: [Int] = []
        for device in ["aa", "bb", "cc"] {
            let block = encode(apnsFields, path: device, authorization: authorization, encoder: &encoder)
            sizes.append(block.readableBytes)
            let fields = try decoded(block, decoder: &decoder)
            #expect(
                fields == [":method: POST", ":scheme: https", ":path: /3/device/\(device)"]
                    + apnsFields.map { "\($0.name): \($0.value)" }
                    + ["authorization: \(authorization)"]
            )
        }
        #expect(sizes[1] < sizes[0] - 60)
        #expect(sizes[1] == sizes[2])
    }

    @Test("the generation changes only when the table does")
    func generation() {
        var encoder = HPACKRequestEncoder()
        var scratch = ByteBuffer()
        let start = encoder.generation
        encoder.writeIndexable(name: "apns-topic", value: "a", into: &scratch)
        #expect(encoder.generation != start)
        let afterInsert = encoder.generation
        encoder.writeIndexable(name: "apns-topic", value: "a", into: &scratch)
        encoder.writeIndexable(name: ":method", value: "POST", into: &scratch)
        #expect(encoder.generation == afterInsert)
    }

    @Test("a small table evicts the same entries the decoder evicts, over many alternating notifications")
    func evictionStaysInStep() throws {
        var encoder = HPACKRequestEncoder()
        encoder.peerAllowsTableSize(200)
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var generator = SystemRandomNumberGenerator()
        for round in 0..<300 {
            let topic = "com.example.app\(Int.random(in: 0..<7, using: &generator))"
            let collapse = String(repeating: "c", count: Int.random(in: 1..<90, using: &generator))
            let fields: [Field] = [(":authority", "localhost"), ("apns-topic", topic), ("apns-collapse-id", collapse)]
            let block = encode(fields, path: "\(round)", authorization: nil, encoder: &encoder)
            let decodedFields = try decoded(block, decoder: &decoder)
            #expect(
                decodedFields == [":method: POST", ":scheme: https", ":path: /3/device/\(round)"]
                    + fields.map { "\($0.name): \($0.value)" }
            )
        }
    }

    @Test("SETTINGS_HEADER_TABLE_SIZE 0: a size update, then everything literal")
    func tableSizeZero() throws {
        var encoder = HPACKRequestEncoder()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        _ = try decoded(encode(apnsFields, path: "a", authorization: nil, encoder: &encoder), decoder: &decoder)
        encoder.peerAllowsTableSize(0)
        let block = encode(apnsFields, path: "b", authorization: nil, encoder: &encoder)
        #expect(block.getInteger(at: 0, as: UInt8.self) == 0x20)  // dynamic table size update to 0
        #expect(try decoded(block, decoder: &decoder).count == 3 + apnsFields.count)
        let generation = encoder.generation
        let again = encode(apnsFields, path: "c", authorization: nil, encoder: &encoder)
        #expect(try decoded(again, decoder: &decoder).count == 3 + apnsFields.count)
        #expect(encoder.generation != generation, "an entry larger than the table still changes it (it empties it)")
    }

    @Test(
        "integers across the prefix boundary",
        arguments: [0, 14, 15, 16, 126, 127, 128, 300, 16_383, 16_384, 1_000_000]
    )
    func integers(value: Int) throws {
        let name = "x-\(value)"
        let valueString = String(repeating: "v", count: value % 5000)
        var buffer = ByteBuffer()
        HPACKRequestEncoder.writeNotIndexed(name: name, value: valueString, into: &buffer)
        var decoder = HPACKDecoder(
            allocator: ByteBufferAllocator(),
            maxDynamicTableSize: 4096,
            maxHeaderListSize: 1 << 20
        )
        let headers = try decoder.decodeHeaders(from: &buffer)
        #expect(headers.first?.name == name)
        #expect(headers.first?.value == valueString)
        var integer = ByteBuffer()
        HPACKRequestEncoder.writeInteger(value, prefixBits: 5, firstByteFlags: 0x20, into: &integer)
        var updates = HPACKDecoder(
            allocator: ByteBufferAllocator(),
            maxDynamicTableSize: 2_000_000,
            maxHeaderListSize: 1 << 20
        )
        // A size update is a bare integer: decoding one checks the encoding against NIO's reader.
        _ = try updates.decodeHeaders(from: &integer)
        #expect(updates.allowedDynamicTableLength == value)
    }
}
