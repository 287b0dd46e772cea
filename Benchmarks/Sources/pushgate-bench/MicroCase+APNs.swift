import APNsHTTP2
import APNsTransport
import NIOCore
import NIOEmbedded
import NIOHPACK
import PushTransport
import PushgateCore

/// The APNs client's per-device work: its HTTP/2 connection handler, the APNs exchange's header block
/// and the reading of answers, all the client's own code.
extension MicroCase {
    static var apns: [MicroCase] {
        [
            MicroCase(
                name: "apns-exchange",
                operation:
                    "one APNs request written (HEADERS + DATA) and its 200 answer read, by the client's connection "
                    + "handler on an EmbeddedChannel (batches of 100; no TLS, no socket)",
                prepare: { try MicroAPNsConnection.exchangeWorkload() }
            ),
            MicroCase(
                name: "apns-headers",
                operation: "one request's HPACK header block as the APNs exchange writes it (shared block cached)",
                prepare: { try MicroAPNsConnection.headerBlockWorkload() }
            ),
            MicroCase(
                name: "h2-answers",
                operation: "one 200 answer cut from a read by HTTP2FrameParser and read by HPACKAnswerReader",
                prepare: { try MicroAPNsAnswers.readingWorkload() }
            ),
        ]
    }
}

/// The pool's side of the benchmark's connection: it hands the handler the requests it is given.
/// `@unchecked Sendable`: an EmbeddedChannel runs everything on the thread that drives it, this one.
final class MicroAPNsPool: APNsConnectionDelegate, @unchecked Sendable {
    let token: ProviderToken
    var pending: [APNsRequest] = []
    var ready = false
    var closed: String?
    var requeued = 0
    private var nextPoolRequestID: UInt64 = 0

    init(token: ProviderToken) { self.token = token }

    func pull(connection id: Int, released: Int, maximum: Int) -> [PooledRequest] {
        let taken = pending.prefix(maximum)
        pending.removeFirst(taken.count)
        return taken.map { request in
            nextPoolRequestID += 1
            return PooledRequest(request: request, poolRequestID: nextPoolRequestID, deadline: .distantFuture)
        }
    }

    func connectionReady(_ id: Int, capacity: Int) { ready = true }
    func connectionCapacityChanged(_ id: Int, capacity: Int) {}
    func connectionRetiring(_ id: Int) {}
    func connectionClosed(_ id: Int, everReady: Bool, error: String?) { closed = error ?? "closed" }
    func requeue(_ requests: [PooledRequest], because failure: PushTransportFailure) { requeued += requests.count }
    func providerToken() throws -> ProviderToken? { token }
    func providerTokenRejectedAsExpired(_ token: ProviderToken) {}
    func streamAnswered(roundTrip: TimeAmount) {}
}

/// Counts outcomes. `@unchecked Sendable`: called on the EmbeddedChannel's thread only, this one.
final class MicroOutcomeCounter: APNsOutcomeReceiver, @unchecked Sendable {
    var accepted = 0
    var other: [APNsOutcome] = []

    func receive(_ outcome: APNsOutcome, for request: APNsRequest) {
        if outcome.outcomeClass == .accepted { accepted += 1 } else { other.append(outcome) }
    }
}

/// One APNs connection as the client runs it (`APNsConnectionHandler`, i.e. the transport's HTTP/2 push
/// handler with the APNs exchange) on an EmbeddedChannel, with a server written by hand: SETTINGS, then
/// per batch 100 answers of 200 and a connection WINDOW_UPDATE in one read.
final class MicroAPNsConnection {
    static let batchSize = 100
    static let authority = APNsEnvironment.production.host

    let channel = EmbeddedChannel()
    let pool: MicroAPNsPool
    let outcomes = MicroOutcomeCounter()
    let handler: APNsConnectionHandler
    let requests: [APNsRequest]
    var answers: MicroAPNsAnswers
    /// The stream id of the next batch's first request.
    var firstStreamID: UInt32 = 1

    init() throws {
        let notification = PreparedNotification(try MicroFixtures.content())
        pool = MicroAPNsPool(token: try MicroFixtures.signer().sign(issuedAt: MicroFixtures.receivedAt))
        requests = try (0..<Self.batchSize).map { [outcomes] index in
            APNsRequest(
                notification: notification,
                deviceToken: try MicroFixtures.deviceToken(index),
                receiver: outcomes
            )
        }
        answers = MicroAPNsAnswers(
            count: Self.batchSize,
            windowIncrement: Self.batchSize * notification.payload.readableBytes
        )
        handler = APNsConnectionHandler(
            HTTP2PushConnectionHandler(
                connectionID: 1,
                delegate: pool,
                exchange: APNsExchange(authority: Self.authority, delegate: pool),
                configuration: .init(connection: .init(), logger: MicroFixtures.quietLogger),
                now: channel.eventLoop.now
            )
        )
        try channel.pipeline.syncOperations.addHandler(handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        // The server's SETTINGS (1,000 streams, 1 MiB stream windows), and its acknowledgement of ours.
        var settings = ByteBuffer()
        HTTP2Wire.writeFrameHeader(length: 12, type: .settings, flags: 0, streamID: 0, into: &settings)
        for (setting, value) in [(HTTP2Wire.Setting.maxConcurrentStreams, 1_000), (.initialWindowSize, 1 << 20)] {
            settings.writeInteger(setting.rawValue)
            settings.writeInteger(UInt32(value))
        }
        HTTP2Wire.writeSettingsAcknowledgement(into: &settings)
        try channel.writeInbound(settings)
        try MicroCheckFailure.require(pool.ready, "the handler did not become ready after the server's SETTINGS")
        _ = try written()
    }

    /// Everything the handler wrote since the last call.
    func written() throws -> ByteBuffer {
        var all = ByteBuffer()
        while var bytes = try channel.readOutbound(as: ByteBuffer.self) { all.writeBuffer(&bytes) }
        return all
    }

    /// The timed part: the pool hands over 100 requests, the handler writes them (one flush), the server's
    /// 100 answers arrive in one read and the handler completes every request.
    func batch() throws -> ByteBuffer {
        pool.pending = requests
        handler.wake()
        let bytes = try written()
        let acceptedBefore = outcomes.accepted
        answers.setStreamIDs(from: firstStreamID)
        try channel.writeInbound(answers.bytes)
        firstStreamID += UInt32(2 * Self.batchSize)
        try MicroCheckFailure.require(
            outcomes.accepted == acceptedBefore + Self.batchSize && outcomes.other.isEmpty && pool.closed == nil,
            "a batch of \(Self.batchSize) gave \(outcomes.accepted - acceptedBefore) accepted outcomes, "
                + "others \(outcomes.other.prefix(3)), connection closed: \(pool.closed ?? "no")"
        )
        return bytes
    }

    /// `apns-exchange`: checks the first batch's frames and headers, then times batches. A connection
    /// lasts ~10^9 streams; a new one is opened long before they run out.
    static func exchangeWorkload() throws -> MicroWorkload {
        var connection = try MicroAPNsConnection()
        try check(written: try connection.batch(), requests: connection.requests, token: connection.pool.token)
        return MicroWorkload {
            if connection.firstStreamID > 1 << 30 { connection = try MicroAPNsConnection() }
            _ = try connection.batch()
            return batchSize
        }
    }

    /// `apns-headers`: `APNsExchange.writeHeaderBlock` alone, for devices in turn, into a cleared buffer.
    static func headerBlockWorkload() throws -> MicroWorkload {
        let connection = try MicroAPNsConnection()
        let pooled = connection.requests.enumerated().map { index, request in
            PooledRequest(request: request, poolRequestID: UInt64(index), deadline: .distantFuture)
        }
        var exchange = APNsExchange(authority: authority, delegate: connection.pool)
        var encoder = HPACKRequestEncoder()
        guard case .write(let credential) = exchange.credential(for: pooled) else {
            throw MicroCheckFailure("the exchange had no provider token for the batch")
        }
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        for index in 0..<3 {
            var block = ByteBuffer()
            _ = exchange.writeHeaderBlock(of: pooled[index], credential: credential, encoder: &encoder, into: &block)
            try checkHeaders(&block, decoder: &decoder, request: pooled[index].request, token: connection.pool.token)
        }
        var buffer = ByteBuffer()
        buffer.reserveCapacity(1_024)
        return MicroWorkload {
            for request in pooled {
                buffer.clear()
                _ = exchange.writeHeaderBlock(of: request, credential: credential, encoder: &encoder, into: &buffer)
            }
            return pooled.count
        }
    }

    /// The frames of a batch: HEADERS then DATA per request, on streams 1, 3, 5..., every header as
    /// APNs expects it and the payload whole.
    static func check(written: ByteBuffer, requests: [APNsRequest], token: ProviderToken) throws {
        var parser = HTTP2FrameParser()
        var bytes = written
        parser.append(&bytes)
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        for (index, request) in requests.enumerated() {
            let streamID = UInt32(2 * index + 1)
            guard case .headers(streamID, var block, false) = try parser.nextFrame() else {
                throw MicroCheckFailure("request \(index): no HEADERS on stream \(streamID)")
            }
            try checkHeaders(&block, decoder: &decoder, request: request, token: token)
            guard case .data(streamID, let data, true, _) = try parser.nextFrame(),
                data.readableBytesView.elementsEqual(request.notification.content.payload.bytes)
            else {
                throw MicroCheckFailure("request \(index): no DATA with the payload on stream \(streamID)")
            }
        }
        try MicroCheckFailure.require(try parser.nextFrame() == nil, "more frames than requests")
    }

    static func checkHeaders(
        _ block: inout ByteBuffer,
        decoder: inout HPACKDecoder,
        request: APNsRequest,
        token: ProviderToken
    ) throws {
        let headers = try decoder.decodeHeaders(from: &block)
        let content = request.notification.content
        let expected = [
            (":method", "POST"), (":scheme", "https"), (":path", "/3/device/" + request.deviceToken.hex),
            (":authority", authority), ("apns-topic", content.topic.bundleID),
            ("apns-collapse-id", MicroFixtures.collapseID), ("authorization", token.authorizationHeaderValue),
        ]
        for (name, value) in expected {
            try MicroCheckFailure.require(headers[name] == [value], "\(name) is \(headers[name]), not \(value)")
        }
    }
}
