import APNsHTTP2
import NIOCore
import PushTransport

/// What APNs sends back for a batch of accepted notifications, as one read: per stream a HEADERS frame
/// (END_STREAM | END_HEADERS) with `:status: 200` (static index 8) and `apns-id` as a literal without
/// indexing, then a WINDOW_UPDATE returning the connection window the payloads used.
struct MicroAPNsAnswers {
    static let apnsID = "5E1D3A4B-0C2F-4E8A-9B7D-6F1A2C3D4E5F"

    private(set) var bytes = ByteBuffer()
    /// Where each answer's stream id is, so that the same bytes answer the next batch's streams.
    private var streamIDOffsets: [Int] = []

    init(count: Int, windowIncrement: Int) {
        var block = ByteBuffer()
        block.writeInteger(UInt8(0x88))
        block.writeInteger(UInt8(0x00))
        for text in ["apns-id", Self.apnsID] {
            block.writeInteger(UInt8(text.utf8.count))
            block.writeString(text)
        }
        for index in 0..<count {
            streamIDOffsets.append(bytes.writerIndex + 5)
            HTTP2Wire.writeFrameHeader(
                length: block.readableBytes,
                type: .headers,
                flags: HTTP2Wire.Flag.endStream | HTTP2Wire.Flag.endHeaders,
                streamID: UInt32(2 * index + 1),
                into: &bytes
            )
            bytes.writeImmutableBuffer(block)
        }
        HTTP2Wire.writeConnectionWindowUpdate(windowIncrement, into: &bytes)
    }

    /// Answers streams `first`, `first + 2`, ... (client streams are odd).
    mutating func setStreamIDs(from first: UInt32) {
        for (index, offset) in streamIDOffsets.enumerated() {
            bytes.setInteger(first + UInt32(2 * index), at: offset)
        }
    }

    /// `h2-answers`: the answers of a batch given to a connection's `HTTP2FrameParser` in one read and
    /// each HEADERS block read by `HPACKAnswerReader`, as the APNs exchange reads them.
    static func readingWorkload() throws -> MicroWorkload {
        let count = MicroAPNsConnection.batchSize
        let answers = MicroAPNsAnswers(count: count, windowIncrement: 13_300).bytes
        var parser = HTTP2FrameParser()
        func read() throws -> Int {
            var accepted = 0
            var bytes = answers
            parser.append(&bytes)
            while let frame = try parser.nextFrame() {
                guard case .headers(_, let block, true) = frame else { continue }
                if let fields = HPACKAnswerReader.read(block, maximumHeaderListSize: 1 << 16), fields.status == 200,
                    fields.apnsID?.readableBytesView.elementsEqual(apnsID.utf8) == true
                {
                    accepted += 1
                }
            }
            try MicroCheckFailure.require(accepted == count, "\(accepted) answers of 200 read, not \(count)")
            return count
        }
        _ = try read()
        return MicroWorkload(round: read)
    }
}
