import NIOCore
import NIOHPACK
import PushTransport
import PushgateCore

/// FCM's side of an HTTP/2 push connection: a request is a `messages:send` header block
/// (``FCMRequestHeaders``, with the access token as `authorization: Bearer`) and the message addressed
/// to its registration token; an answer (``FCMAnswer``) is classified as an `FCMOutcome`.
///
/// A 401 without an FCM error code (the access token was refused) drops the token, and the message is
/// resent once with a fresh one (waiting for it as long as the token endpoint is down); refused again, it
/// completes as a configuration alarm, never as a dead device, and the dispatcher holds it.
struct FCMExchange: HTTP2PushExchange {
    typealias Request = FCMPooledRequest
    typealias Credential = FCMAccessToken
    typealias Extra = Never
    typealias HeaderFields = HPACKHeaders
    typealias Outcome = FCMOutcome

    /// What a stream keeps: the token it was sent with and what has arrived of its answer.
    struct Answer {
        var token: FCMAccessToken
        var answer = FCMAnswer()
    }

    static var metadataPrefix: String { "fcm" }
    static var maximumAnswerBodyBytes: Int { FCMAnswer.maximumBodyBytes }

    let headers: FCMRequestHeaders
    let bearer: FCMBearerCache
    /// Reads `Retry-After` dates against it.
    let clock: any WallClock
    private var wake: (@Sendable () -> Void)?
    /// What `mayWrite()` found, for the batch it let through.
    private var availability: FCMBearerCache.Availability?

    init(headers: FCMRequestHeaders, bearer: FCMBearerCache, clock: any WallClock) {
        self.headers = headers
        self.bearer = bearer
        self.clock = clock
    }

    mutating func attached(wake: @escaping @Sendable () -> Void) {
        self.wake = wake
    }

    mutating func mayWrite() -> Bool {
        let found = bearer.current(wake: wake ?? {})
        availability = found
        if case .wait = found { return false }
        return true
    }

    mutating func credential(for batch: [FCMPooledRequest]) -> HTTP2PushBatchCredential<FCMAccessToken> {
        defer { availability = nil }
        switch availability {
        case .token(let token)?:
            return .write(token)
        case .refused(let pause)?:
            // Nothing was sent: the devices wait (the dispatcher holds them until the next fetch, within
            // their requests' expiration) instead of failing for the credentials.
            let wait = max(0, pause.retryAt.timeIntervalSince(clock.now()))
            let outcome = FCMOutcome(
                outcomeClass: .retryable,
                isConfigurationAlarm: true,
                retryAfter: .milliseconds(Int64((wait * 1000).rounded(.up))),
                credentialsRefused: true
            )
            for request in batch { request.complete(outcome) }
            return .failed
        case .wait?, nil:
            // Not reached: the handler pulls only after `mayWrite()` said yes.
            for request in batch { request.fail(.connectFailed("no access token")) }
            return .failed
        }
    }

    func writeHeaderBlock(
        of pooled: borrowing FCMPooledRequest,
        credential token: FCMAccessToken,
        encoder: inout HPACKRequestEncoder,
        into buffer: inout ByteBuffer
    ) -> (body: ByteBuffer, answer: Answer) {
        let body = pooled.request.message.requestBody(token: pooled.request.token)
        headers.write(accessToken: token, contentLength: body.count, encoder: &encoder, into: &buffer)
        return (ByteBuffer(bytes: body), Answer(token: token))
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
        of request: borrowing FCMPooledRequest
    ) -> Never? {
        answer.answer.read(fields)
        return nil
    }

    mutating func finish(
        _ pooled: borrowing FCMPooledRequest,
        answer: Answer,
        body: ByteBuffer?,
        extra: Never?,
        roundTrip: TimeAmount
    ) -> (HTTP2PushStreamDisposition<FCMPooledRequest, FCMOutcome>, retireConnection: String?) {
        var gathered = answer.answer
        if let body { gathered.append(body) }
        var outcome = gathered.outcome(now: clock.now())
        if outcome.accessTokenRejected {
            bearer.tokenRejected(answer.token)
            if !pooled.resentAfterRefusedAccessToken {
                var retry = copy pooled
                retry.resentAfterRefusedAccessToken = true
                return (.requeue(retry, because: .credentialRefused), nil)
            }
            // Refused twice, with two tokens: the credentials are wrong, not the device.
            outcome.isConfigurationAlarm = true
        }
        return (.complete(outcome), nil)
    }

    mutating func complete(_ pooled: borrowing FCMPooledRequest, with outcome: FCMOutcome) {
        pooled.complete(outcome)
    }

    /// GOAWAY's debug data is Google's prose: not logged.
    mutating func goAwayReceived(debugData: ByteBuffer) -> String? { nil }

    mutating func connectionLost(_ pooled: borrowing FCMPooledRequest) {
        pooled.fail(.connectionLost)
    }
}
