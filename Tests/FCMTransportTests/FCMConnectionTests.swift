import FCMSimulator
import Foundation
import Logging
import NIOCore
import NIOEmbedded
import NIOHPACK
import PushTransport
import PushgateCore
import Testing

@testable import FCMTransport

/// The FCM exchange in the shared HTTP/2 handler on an `EmbeddedChannel`, the server's frames written
/// by hand: what the simulator cannot be made to do on demand (GOAWAY mid-flight, a dropped connection).
@Suite("FCM connection: the shared HTTP/2 handler with the FCM exchange")
struct FCMConnectionTests {
    final class Pool: HTTP2PushConnectionDelegate, @unchecked Sendable {
        var work: [FCMPooledRequest] = []
        var capacity: Int?
        var requeued: [(token: String, failure: PushTransportFailure)] = []
        func connectionReady(_ id: Int, capacity: Int) { self.capacity = capacity }
        func connectionCapacityChanged(_ id: Int, capacity: Int) { self.capacity = capacity }
        func connectionRetiring(_ id: Int) {}
        func connectionClosed(_ id: Int, everReady: Bool, error: String?) {}
        func pull(connection id: Int, released: Int, maximum: Int) -> [FCMPooledRequest] {
            defer { work.removeFirst(min(maximum, work.count)) }
            return Array(work.prefix(maximum))
        }
        func requeue(_ requests: [FCMPooledRequest], because failure: PushTransportFailure) {
            requeued += requests.map { ($0.request.token, failure) }
        }
    }

    /// Grants the same access token to every assertion.
    struct FixedGrant: FCMTokenExchanging {
        func exchange(assertion: String, tokenURI: URL) async throws(FCMCredentialError) -> FCMTokenGrant {
            FCMTokenGrant(accessToken: "ya29.fixed", expiresIn: .seconds(3600))
        }
    }

    let channel = EmbeddedChannel()
    let pool = Pool()
    let collector = OutcomeCollector()
    var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
    var parser = HTTP2FrameParser()

    /// A handler holding an access token, connected, after the server's SETTINGS (10 streams).
    func connect(answerTimeout: TimeAmount? = nil) async throws -> FCMConnectionHandler {
        let material = try FCMThrowawayServiceAccount(projectID: "demo-project", tokenURI: "https://127.0.0.1/token")
        let account = try FCMServiceAccount(jsonBytes: material.jsonBytes)
        let manager = FCMAccessTokenManager(signer: FCMAssertionSigner(account: account), exchanger: FixedGrant())
        let bearer = FCMBearerCache(manager: manager, clock: SystemWallClock())
        try await bearer.prefetch()
        let handler = FCMConnectionHandler(
            HTTP2PushConnectionHandler(
                connectionID: 1,
                delegate: pool,
                exchange: FCMExchange(
                    headers: FCMRequestHeaders(authority: "fcm.test", projectID: "demo-project"),
                    bearer: bearer,
                    clock: SystemWallClock()
                ),
                configuration: .init(connection: .init(), answerTimeout: answerTimeout, logger: Logger(label: "test")),
                now: channel.eventLoop.now
            )
        )
        try channel.pipeline.syncOperations.addHandler(handler)
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).get()
        try channel.writeInbound(frame(.settings, [0, 0x3, 0, 0, 0, 10]))
        return handler
    }

    func frame(_ type: HTTP2Wire.FrameType, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8]) -> ByteBuffer {
        var buffer = ByteBuffer()
        HTTP2Wire.writeFrameHeader(length: payload.count, type: type, flags: flags, streamID: stream, into: &buffer)
        buffer.writeBytes(payload)
        return buffer
    }

    /// The client's HEADERS (decoded) and DATA frames since the last call, by stream.
    mutating func written() throws -> (headers: [UInt32: HPACKHeaders], data: [UInt32: String]) {
        var result: (headers: [UInt32: HPACKHeaders], data: [UInt32: String]) = ([:], [:])
        while var bytes = try channel.readOutbound(as: ByteBuffer.self) {
            let preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
            if bytes.readableBytesView.starts(with: preface.utf8) {
                bytes.moveReaderIndex(forwardBy: preface.utf8.count)
            }
            parser.append(&bytes)
            while let frame = try parser.nextFrame() {
                if case .headers(let stream, var block, _) = frame {
                    result.headers[stream] = try decoder.decodeHeaders(from: &block)
                } else if case .data(let stream, let data, _, _) = frame {
                    result.data[stream, default: ""] += String(buffer: data)
                }
            }
        }
        return result
    }

    func pooled(_ token: String, id: UInt64) throws -> FCMPooledRequest {
        FCMPooledRequest(
            request: FCMSendRequest(message: try notificationMessage(), token: token, receiver: collector),
            poolRequestID: id,
            deadline: .now() + .seconds(60)
        )
    }

    @Test("requests carry the bearer token and the derived body; GOAWAY requeues what the server never processed")
    mutating func goAwayRequeues() async throws {
        let handler = try await connect()
        #expect(pool.capacity == 10)
        pool.work = try (0..<3).map { try pooled(registrationToken($0), id: UInt64($0)) }
        handler.wake()
        let sent = try written()
        #expect(sent.headers.keys.sorted() == [1, 3, 5])
        let first = sent.headers[1]
        #expect(first?[":path"] == ["/v1/projects/demo-project/messages:send"])
        #expect(first?[":authority"] == ["fcm.test"])
        #expect(first?["authorization"] == ["Bearer ya29.fixed"])
        let body = try notificationMessage().requestBody(token: registrationToken(0))
        #expect(sent.data[1] == String(decoding: body, as: UTF8.self))
        #expect(first?["content-length"] == ["\(body.count)"])

        // GOAWAY: the server processed stream 1 only.
        try channel.writeInbound(frame(.goAway, [0, 0, 0, 1, 0, 0, 0, 0]))
        #expect(pool.requeued.map(\.token) == [registrationToken(1), registrationToken(2)])
        #expect(pool.requeued.allSatisfy { $0.failure == .goAway })

        // Stream 1's answer still arrives and is delivered.
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var block = ByteBuffer()
        try encoder.encode(headers: [":status": "200", "content-type": "application/json"], to: &block)
        try channel.writeInbound(frame(.headers, flags: 0x4, stream: 1, Array(buffer: block)))
        let answer = #"{"name":"projects/demo-project/messages/0:1"}"#
        try channel.writeInbound(frame(.data, flags: 0x1, stream: 1, Array(answer.utf8)))
        let outcomes = await collector.wait(for: 1)
        #expect(outcomes.first?.outcome.isAccepted == true)
        #expect(outcomes.first?.outcome.messageName == "projects/demo-project/messages/0:1")
    }

    @Test("a dropped connection: a written, unanswered message comes back retryable (connection lost), not resent")
    mutating func droppedConnection() async throws {
        let handler = try await connect()
        pool.work = [try pooled(registrationToken(9), id: 9)]
        handler.wake()
        #expect(try written().headers.keys.sorted() == [1])
        try await channel.close().get()
        let outcomes = await collector.wait(for: 1)
        #expect(outcomes.first?.outcome.transportFailure == .connectionLost)
        #expect(outcomes.first?.outcome.outcomeClass == .retryable)
        #expect(outcomes.first?.outcome.transportFailure?.mayHaveReachedService == true)
        #expect(pool.requeued.isEmpty)
    }

    /// Issue #27: the pool's deadline runs from submission; time spent queued must not shorten the time
    /// the service has to answer, or a busy host gives up on answers that are merely late.
    @Test("a written message waits answerTimeout from its write, past the pool's deadline; a caller's deadline stands")
    mutating func answerDeadlineRunsFromTheWrite() async throws {
        let handler = try await connect(answerTimeout: .seconds(30))
        let loop = channel.embeddedEventLoop
        let queuedUntil = loop.now + .seconds(1)
        let message = try notificationMessage()
        pool.work = [
            // The pool's default deadline (the caller set none): 1 s from now, as if it had queued 29 s.
            FCMPooledRequest(
                request: FCMSendRequest(message: message, token: registrationToken(1), receiver: collector),
                poolRequestID: 1,
                deadline: queuedUntil
            ),
            // The caller's own deadline.
            FCMPooledRequest(
                request: FCMSendRequest(
                    message: message,
                    token: registrationToken(2),
                    receiver: collector,
                    deadline: queuedUntil
                ),
                poolRequestID: 2,
                deadline: queuedUntil
            ),
        ]
        handler.wake()
        #expect(try written().headers.keys.sorted() == [1, 3])
        loop.advanceTime(by: .seconds(2))
        let first = await collector.wait(for: 1)
        #expect(first.map(\.token) == [registrationToken(2)])
        #expect(first.first?.outcome.transportFailure == .answerTimeout)
        loop.advanceTime(by: .seconds(27))
        #expect(collector.count == 1, "still within 30 s of its write")
        loop.advanceTime(by: .seconds(2))
        let both = await collector.wait(for: 2)
        #expect(both.last?.token == registrationToken(1))
        #expect(both.last?.outcome.transportFailure == .answerTimeout)
        #expect(both.last?.outcome.transportFailure?.mayHaveReachedService == true)
        #expect(pool.requeued.isEmpty, "never resent by the transport")
    }
}
