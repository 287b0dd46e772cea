package import Foundation
package import NIOCore
package import NIOHPACK
package import PushgateCore

/// What has arrived of one `messages:send` answer on its stream: `:status`, `retry-after` and the
/// body. When the stream ends, ``outcome(now:)`` classifies it through `FCMOutcome`.
package struct FCMAnswer: Sendable {
    package private(set) var status: Int?
    package private(set) var retryAfter: String?
    package private(set) var body: ByteBuffer?

    /// Answers larger than this are not Google's (an error body is a few hundred bytes): the rest is dropped.
    package static let maximumBodyBytes = 64 * 1024

    package init() {}

    /// A header block of the answer (the first, or trailers).
    package mutating func read(_ headers: HPACKHeaders) {
        for (name, value, _) in headers {
            switch name {
            case ":status": status = Int(value)
            case "retry-after": retryAfter = value
            default: continue
            }
        }
    }

    /// A DATA frame's payload.
    package mutating func append(_ data: ByteBuffer) {
        var data = data
        let room = Self.maximumBodyBytes - (body?.readableBytes ?? 0)
        guard room > 0, data.readableBytes > 0 else { return }
        if data.readableBytes > room { data = data.getSlice(at: data.readerIndex, length: room)! }
        body.setOrWriteBuffer(&data)
    }

    /// The answer's meaning; an answer without `:status` is malformed (no answer at all).
    package func outcome(now: Date) -> FCMOutcome {
        guard let status else { return .failed(.malformedResponse("no :status")) }
        let bytes = body.map { Array($0.readableBytesView) } ?? []
        return .answered(status: status, body: bytes, retryAfter: retryAfter, now: now)
    }
}
