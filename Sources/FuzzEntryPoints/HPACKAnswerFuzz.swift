import APNsHTTP2
import NIOCore
import NIOHPACK

/// `HPACKAnswerReader`, the connection's fast path for answer header blocks, against NIOHPACK's
/// `HPACKDecoder` (the slow path, and the oracle): for a block the reader takes,
/// - the decoder decodes it too, and the handler would read the same `:status`, `apns-id` and
///   `apns-unique-id` from the decoded list (the last of each counts);
/// - a decoder given only the reader's table insertions ends with the same dynamic table as one
///   given the whole block (probed entry by entry).
///
/// The first byte chooses the header list limit; the rest is the block.
enum HPACKAnswerFuzz {
    private static let target = FuzzTarget.hpackAnswer
    private static let tableProbes = 12

    static func run(_ input: UnsafeRawBufferPointer) throws(FuzzViolation) {
        guard let first = input.first else { return }
        let limit = first == 0 ? HPACKDecoder.defaultMaxHeaderListSize : Int(first) * 8
        let block = ByteBuffer(bytes: input.dropFirst())
        guard let fields = HPACKAnswerReader.read(block, maximumHeaderListSize: limit) else { return }

        var whole = decoder(limit: limit)
        var copy = block
        let headers: HPACKHeaders
        do {
            headers = try whole.decodeHeaders(from: &copy)
        } catch {
            throw FuzzViolation(target: target, message: "the reader took a block the decoder refuses: \(error)")
        }
        let expected = read(headers)
        try expect(fields.hasStatus == expected.hasStatus, target, "hasStatus \(fields.hasStatus), decoded \(expected)")
        let status = String(describing: fields.status)
        try expect(fields.status == expected.status, target, "status \(status) vs \(expected)")
        let apnsID = fields.apnsID.map { String(decoding: $0.readableBytesView, as: UTF8.self) }
        try expect(apnsID == expected.apnsID, target, "apns-id \(String(describing: apnsID)) vs \(expected)")
        try expect(fields.apnsUniqueID == expected.apnsUniqueID, target, "apns-unique-id vs \(expected)")

        var fast = decoder(limit: limit)
        if var insertions = fields.tableInsertions {
            do {
                _ = try fast.decodeHeaders(from: &insertions)
            } catch {
                throw FuzzViolation(target: target, message: "the decoder refuses the table insertions: \(error)")
            }
        }
        for index in 62..<(62 + tableProbes) {
            try expect(probe(&whole, index) == probe(&fast, index), target, "dynamic table differs at \(index)")
        }
    }

    private static func decoder(limit: Int) -> HPACKDecoder {
        HPACKDecoder(
            allocator: ByteBufferAllocator(),
            maxDynamicTableSize: HPACKDecoder.maxDynamicTableSize,
            maxHeaderListSize: limit
        )
    }

    /// What the connection handler takes from a decoded list (`readHeaders(_ headers:streamID:)`).
    private struct Expected: CustomStringConvertible {
        var hasStatus = false
        var status: Int?
        var apnsID: String?
        var apnsUniqueID: String?

        var description: String { "\(hasStatus) \(String(describing: status)) \(String(describing: apnsID))" }
    }

    private static func read(_ headers: HPACKHeaders) -> Expected {
        var expected = Expected()
        for (name, value, _) in headers {
            switch name {
            case ":status":
                expected.hasStatus = true
                expected.status = Int(value)
            case "apns-id": expected.apnsID = value
            case "apns-unique-id": expected.apnsUniqueID = value
            default: continue
            }
        }
        return expected
    }

    /// The dynamic table entry at `index` (RFC 7541 §2.3.3), as the decoder reads an indexed field.
    private static func probe(_ decoder: inout HPACKDecoder, _ index: Int) -> [String]? {
        // Indices 62 to 126 fit the 7-bit prefix.
        var block = ByteBuffer(bytes: [UInt8(0x80 | index)])
        guard let headers = try? decoder.decodeHeaders(from: &block) else { return nil }
        return headers.map { "\($0.name): \($0.value)" }
    }
}
