import NIOCore
import NIOHPACK
import PushTransport
import PushgateCore
import WebPush

/// Web Push's side of an HTTP/2 push connection (RFC 8030 §5 over RFC 9113): a request is a `POST` to the
/// subscription's path with `TTL`, `Urgency`, `Topic`, the content coding and the origin's VAPID
/// `Authorization`, and the encrypted body; the answer is its `:status` and `Retry-After`.
///
/// A message written and left unanswered by a connection that closed goes back to the pool
/// (``connectionLost(_:)``), to be sent again on a fresh connection: Web Push has no id a service
/// could deduplicate by, so the rare message the service took before the connection dropped arrives
/// twice, rather than every message a dropped connection held being lost.
struct WebPushHTTP2Exchange: HTTP2PushExchange {
    typealias Request = WebPushPooledRequest
    /// The origin's `Authorization` value.
    typealias Credential = String
    typealias Extra = Never
    typealias HeaderFields = HPACKHeaders
    typealias Outcome = WebPushOutcome

    struct Answer {
        var authorization: String
        var status: Int?
        var retryAfter: String?
    }

    static var metadataPrefix: String { "webpush" }
    /// The body of an answer is not read (its status says everything): kept small.
    static var maximumAnswerBodyBytes: Int { 1024 }

    let origin: WebPushOrigin
    /// `host[:port]`, as the origin writes it.
    let authority: String
    let credentials: WebPushVAPIDCredentials
    let pool: any HTTP2PushConnectionDelegate<WebPushPooledRequest>

    mutating func credential(for batch: [WebPushPooledRequest]) -> HTTP2PushBatchCredential<String> {
        .write(credentials.authorization(for: origin))
    }

    func writeHeaderBlock(
        of pooled: borrowing WebPushPooledRequest,
        credential: String,
        encoder: inout HPACKRequestEncoder,
        into buffer: inout ByteBuffer
    ) -> (body: ByteBuffer, answer: Answer) {
        let request = pooled.request
        encoder.writePendingSizeUpdate(into: &buffer)
        // `:method POST` and `:scheme https` are static-table entries 3 and 7.
        buffer.writeMultipleIntegers(0x83 as UInt8, 0x87 as UInt8)
        // Each subscription has its own path: a literal, kept out of the table.
        HPACKRequestEncoder.writeNotIndexed(
            staticNameIndex: HPACKRequestEncoder.StaticName.path,
            value: request.path,
            into: &buffer
        )
        encoder.writeIndexable(name: ":authority", value: authority, into: &buffer)
        encoder.writeIndexable(name: "content-encoding", value: "aes128gcm", into: &buffer)
        encoder.writeIndexable(name: "content-type", value: "application/octet-stream", into: &buffer)
        encoder.writeIndexable(name: "ttl", value: String(request.headers.ttl), into: &buffer)
        encoder.writeIndexable(name: "urgency", value: request.headers.urgency.rawValue, into: &buffer)
        if let topic = request.headers.topic {
            HPACKRequestEncoder.writeNotIndexed(name: "topic", value: topic, into: &buffer)
        }
        // A credential: never in the table.
        HPACKRequestEncoder.writeNotIndexed(
            staticNameIndex: HPACKRequestEncoder.StaticName.authorization,
            value: credential,
            into: &buffer
        )
        HPACKRequestEncoder.writeNotIndexed(
            name: "content-length",
            value: String(request.body.readableBytes),
            into: &buffer
        )
        return (request.body, Answer(authorization: credential))
    }

    mutating func decodeHeaders(
        _ block: inout ByteBuffer,
        decoder: inout HPACKDecoder,
        tracked: Bool
    ) throws -> HPACKHeaders? {
        let fields = try decoder.decodeHeaders(from: &block)
        return tracked ? fields : nil
    }

    mutating func read(
        _ fields: HPACKHeaders,
        into answer: inout Answer,
        of request: borrowing WebPushPooledRequest
    )
        -> Never?
    {
        for (name, value, _) in fields {
            switch name {
            case ":status": answer.status = Int(value)
            case "retry-after": answer.retryAfter = value
            default: continue
            }
        }
        return nil
    }

    mutating func finish(
        _ pooled: borrowing WebPushPooledRequest,
        answer: Answer,
        body: ByteBuffer?,
        extra: Never?,
        roundTrip: TimeAmount
    ) -> (HTTP2PushStreamDisposition<WebPushPooledRequest, WebPushOutcome>, retireConnection: String?) {
        guard let status = answer.status else {
            return (.complete(.failed(.malformedResponse("no :status"))), nil)
        }
        let disposition = credentials.disposition(
            of: copy pooled,
            status: status,
            retryAfter: answer.retryAfter,
            authorization: answer.authorization
        )
        return (disposition, nil)
    }

    mutating func complete(_ pooled: borrowing WebPushPooledRequest, with outcome: WebPushOutcome) {
        pooled.complete(outcome)
    }

    mutating func goAwayReceived(debugData: ByteBuffer) -> String? { nil }

    /// Written, unanswered, the connection gone: sent again on another connection (counted against the
    /// pool's resends; when they are spent it fails `connection_lost`).
    mutating func connectionLost(_ pooled: borrowing WebPushPooledRequest) {
        credentials.metrics.resent(.connectionLost)
        pool.requeue([copy pooled], because: .connectionLost)
    }
}
