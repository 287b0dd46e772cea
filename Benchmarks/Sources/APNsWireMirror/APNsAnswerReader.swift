public import NIOCore
import NIOHPACK

/// The answer-reading half of `APNsConnectionHandler` (`channelRead`, `handle(_:now:context:)` for
/// HEADERS, `readHeaders`), reachable from the benchmarks: the client's `HTTP2FrameParser` (a symbolic
/// link here) cuts frames, NIOHPACK's `HPACKDecoder` decodes the block, and `:status`, `apns-id` and
/// `apns-unique-id` are read out as the handler reads them. Left out: the `inFlight` lookup and
/// `finishStream` (classification, the pool's books), DATA bodies, SETTINGS, PING, WINDOW_UPDATE.
public struct APNsAnswerReader {
    public struct Answer {
        public var streamID: UInt32
        public var status: Int?
        public var apnsID: String?
        public var apnsUniqueID: String?
    }

    private var parser = HTTP2FrameParser()
    private var decoder = HPACKDecoder(allocator: ByteBufferAllocator())

    public init() {}

    /// Reads what arrived; calls `answered` for each HEADERS frame that ends its stream.
    public mutating func read(_ bytes: inout ByteBuffer, answered: (Answer) -> Void) throws {
        parser.append(&bytes)
        while let frame = try parser.nextFrame() {
            guard case .headers(let streamID, var block, let endStream) = frame else { continue }
            let headers = try decoder.decodeHeaders(from: &block)
            var answer = Answer(streamID: streamID)
            for (name, value, _) in headers {
                switch name {
                case ":status": answer.status = Int(value)
                case "apns-id": answer.apnsID = value
                case "apns-unique-id": answer.apnsUniqueID = value
                default: continue
                }
            }
            if endStream { answered(answer) }
        }
    }
}
