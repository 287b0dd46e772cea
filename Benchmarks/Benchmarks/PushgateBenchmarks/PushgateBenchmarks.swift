// Micro-benchmarks of the per-notification work in pushgate: what a broadcast repeats for every
// device (request headers, HPACK, HTTP/2 frames, the dispatcher's decision) and what each request or
// datagram pays once (JWT signing, token and payload validation, datagram parsing).
//
// Each benchmark runs `benchmark.scaledIterations` operations per measured sample, so the figures the
// tool prints (marked `*`) are per operation. See ../../README.md for how to run, and
// ../../../docs/benchmarks.md (Micro-benchmarks) for measured numbers.

import APNsWireMirror
import Benchmark
import Crypto
import DispatchStepMirror
import Foundation
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import PushgateCore
import UDPDatagramMirror

// MARK: - Fixtures (built once, outside every measurement)

/// A 32-byte token, as APNs issues them today.
let tokenHex = "be6406fe9e686c11f999c9d47e33b41be56be48f0c77570423bb89f5b51cf127"

/// A typical alert payload (133 bytes).
let payloadJSON = #"{"aps":{"alert":{"title":"Flash sale","body":"Everything is 20% off until midnight."},"badge":1,"sound":"default"},"campaign":"c-2041"}"#

/// The pushd-compatible datagram for a broadcast to one group.
let notificationDatagram = Array(
    #"{"groups": ["customers"], "type": "urgent", "expiration": 1900000000, "key": "sale-2041", "payload": \#(payloadJSON)}"#
        .utf8)

let fixedNow = Date(timeIntervalSince1970: 1_800_000_000)

let answerHeaderName = "apns-id"
let answerAPNsID = "5E1D3A4B-0C2F-4E8A-9B7D-6F1A2C3D4E5F"

/// What the client builds once per notification (`PreparedNotification`) and once per provider token,
/// rebuilt here from the same public inputs; and, for the old-path benchmarks, the `HPACKHeaders` the
/// client built before issue #7.
struct RequestFixture: Sendable {
    let token: DeviceToken
    let content: NotificationContent
    let pseudoHeaders: HPACKHeaders
    let sharedHeaders: HPACKHeaders
    let payload: ByteBuffer
    let authorization: String
    let providerToken: ProviderToken
    let notification: MirroredNotification
    /// The same but for its `apns-collapse-id` and payload: a second notification on the same connection.
    let otherNotification: MirroredNotification
    /// 100 distinct devices, for a batch.
    let batchTokens: [DeviceToken]
    /// 100 answers of 200 as a server sends them: HEADERS (END_STREAM | END_HEADERS) with `:status: 200`
    /// (static index 8) and `apns-id` as a literal without indexing, on streams 1, 3, ... 199.
    let answers: ByteBuffer
    let authority = APNsEnvironment.production.host

    init() throws {
        token = try DeviceToken(hex: tokenHex)
        content = try NotificationContent(
            topic: Topic("com.example.shop"), pushType: .alert, priority: .immediate,
            expiration: .at(epochSeconds: 1_900_000_000), collapseID: CollapseID("sale-2041"),
            payload: Payload(jsonString: payloadJSON))

        // Old path: APNsConnectionHandler.init before issue #7
        var pseudo = HPACKHeaders()
        pseudo.add(name: ":method", value: "POST")
        pseudo.add(name: ":scheme", value: "https")
        pseudo.add(name: ":authority", value: APNsEnvironment.production.host)
        pseudoHeaders = pseudo

        // Old path: PreparedNotification.init before issue #7
        var shared = HPACKHeaders()
        shared.reserveCapacity(8)
        for field in content.headerFields {
            shared.add(name: field.name, value: field.value, indexing: .indexable)
        }
        sharedHeaders = shared
        payload = ByteBuffer(bytes: content.payload.bytes)

        let signer = try ProviderTokenSigner(privateKey: P256.Signing.PrivateKey(), keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        providerToken = try signer.sign(issuedAt: fixedNow)
        authorization = providerToken.authorizationHeaderValue

        notification = MirroredNotification(content)
        otherNotification = MirroredNotification(
            try NotificationContent(
                topic: Topic("com.example.shop"), pushType: .alert, priority: .immediate,
                expiration: .at(epochSeconds: 1_900_000_000), collapseID: CollapseID("sale-2042"),
                payload: Payload(jsonString: payloadJSON.replacingOccurrences(of: "c-2041", with: "c-2042"))))
        batchTokens = try (0..<100).map { index in
            try DeviceToken(hex: String(tokenHex.dropLast(4)) + String(format: "%04x", index))
        }

        var answers = ByteBuffer()
        for index in 0..<100 {
            var block = ByteBuffer()
            block.writeInteger(0x88 as UInt8)
            block.writeInteger(0x00 as UInt8)
            block.writeInteger(UInt8(answerHeaderName.utf8.count))
            block.writeString(answerHeaderName)
            block.writeInteger(UInt8(answerAPNsID.utf8.count))
            block.writeString(answerAPNsID)
            answers.writeFrameHeader(length: block.readableBytes, type: 0x1, flags: 0x5, streamID: Int32(2 * index + 1))
            answers.writeBuffer(&block)
        }
        self.answers = answers
    }

    /// A connection's writer after SETTINGS, with the current provider token.
    func connectedWriter() -> APNsRequestWriter {
        var writer = APNsRequestWriter(authority: authority)
        writer.use(providerToken)
        return writer
    }

    /// Old path: the header list of one request as `APNsConnectionHandler.write` assembled it before
    /// issue #7 (no `apns-id`: the dispatcher lets APNs make one up).
    @inline(__always)
    func requestHeaders() -> HPACKHeaders {
        var headers = pseudoHeaders
        headers.reserveCapacity(12)
        headers.add(name: ":path", value: token.requestPath, indexing: .nonIndexable)
        headers.add(name: "authorization", value: authorization, indexing: .nonIndexable)
        headers.add(contentsOf: sharedHeaders)
        return headers
    }
}

// MARK: - Frame bytes a server would send (hand-encoded, so no server-side HPACK state is needed)

extension ByteBuffer {
    mutating func writeFrameHeader(length: Int, type: UInt8, flags: UInt8, streamID: Int32) {
        writeInteger(UInt8(truncatingIfNeeded: length >> 16))
        writeInteger(UInt16(truncatingIfNeeded: length))
        writeInteger(type)
        writeInteger(flags)
        writeInteger(UInt32(streamID))
    }
}

// MARK: - The mirrored writer's bytes, checked once before anything is measured

struct WireMismatch: Error, CustomStringConvertible {
    var description: String
}

/// Decodes what `APNsRequestWriter` writes for three requests (the shared block encoded with
/// insertions, encoded again as indices and kept, then reused) with NIO's HPACK decoder, and checks
/// frames and headers against what APNs must receive; and reads the 100 answers of `fixture.answers`
/// back with `APNsAnswerReader`. So no benchmark times wrong bytes.
func verifyWireMirror(_ fixture: RequestFixture) throws {
    var writer = fixture.connectedWriter()
    var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
    var expected: [(String, String)] = [
        (":method", "POST"), (":scheme", "https"), (":path", fixture.token.requestPath), (":authority", fixture.authority),
    ]
    expected += fixture.content.headerFields.map { ($0.name, $0.value) }
    expected.append(("authorization", fixture.authorization))

    for (round, expectedStreamID) in [(1, 1), (2, 3), (3, 5)] as [(Int, UInt32)] {
        var buffer = ByteBuffer()
        let streamID = writer.writeRequest(to: fixture.token, of: fixture.notification, into: &buffer)
        func frame(_ type: UInt8, _ flags: UInt8) throws -> ByteBuffer {
            guard let length24 = buffer.readInteger(as: UInt8.self), let length16 = buffer.readInteger(as: UInt16.self),
                buffer.readInteger(as: UInt8.self) == type, buffer.readInteger(as: UInt8.self) == flags,
                buffer.readInteger(as: UInt32.self) == expectedStreamID,
                let payload = buffer.readSlice(length: Int(length24) << 16 | Int(length16))
            else { throw WireMismatch(description: "request \(round): frame header of type \(type)") }
            return payload
        }
        var block = try frame(0x1, 0x4)
        let data = try frame(0x0, 0x1)
        let headers = try decoder.decodeHeaders(from: &block)
        let decoded = headers.map { ($0.name, $0.value) }
        guard streamID == expectedStreamID, buffer.readableBytes == 0, data == fixture.payload,
            decoded.elementsEqual(expected, by: { $0 == $1 })
        else {
            throw WireMismatch(description: "request \(round): \(decoded.map { $0.0 }) (\(buffer.readableBytes) bytes left)")
        }
    }

    var reader = APNsAnswerReader()
    var bytes = fixture.answers
    var streams: [UInt32] = []
    try reader.read(&bytes) { answer in
        if answer.status == 200, answer.apnsID == answerAPNsID { streams.append(answer.streamID) }
    }
    guard streams == Array(stride(from: 1, through: 199, by: 2)) else {
        throw WireMismatch(description: "answers read: \(streams.count) of 100")
    }
}

// No `.cpuTotal` or `.instructions`: Linux reports CPU time at 10 ms resolution and this machine has no
// performance counters, and reading the operating system's figures inside the measured region costs
// the harness 16 allocations per sample, which would show in `.one`-scaled benchmarks.
let defaultMetrics: [BenchmarkMetric] = [.wallClock, .mallocCountTotal, .throughput]

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: defaultMetrics, timeUnits: .nanoseconds, warmupIterations: 10, scalingFactor: .kilo,
        maxDuration: .seconds(2), maxIterations: 1_000)

    let fixture: RequestFixture
    do {
        fixture = try RequestFixture()
        try verifyWireMirror(fixture)
    } catch {
        fatalError("benchmark fixture: \(error)")
    }

    // MARK: APNs wire (the client's own HTTP/2 encoding)

    // The code `APNsConnectionHandler.write(_:token:now:)` runs for each device, compiled from the
    // client's own files (see APNsWireMirror). `verifyWireMirror` checked the bytes at start-up.

    // Operations of a microsecond or more run one per sample (not 1,000), so that a sample is short
    // enough to run mostly unpreempted on a busy machine: a 25 ms sample is cut by other processes'
    // time slices, and its wall clock with them (a batch of 100 measured ~45% slower per request
    // at 1,000 per sample than at one).
    let longOperation = Benchmark.Configuration(metrics: defaultMetrics, scalingFactor: .one, maxIterations: 10_000)

    // (a) Steady state: one request's header block, the notification's shared block already encoded
    // and reused (the case of every device after the first of a broadcast).
    Benchmark("APNs wire: header block, shared block warm") { benchmark in
        var writer = fixture.connectedWriter()
        var buffer = ByteBufferAllocator().buffer(capacity: 1024)
        for _ in 0..<2 { writer.writeHeaderBlock(to: fixture.token, of: fixture.notification, into: &buffer) }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            buffer.clear()
            writer.writeHeaderBlock(to: fixture.token, of: fixture.notification, into: &buffer)
            blackHole(buffer.readableBytes)
        }
    }

    // (b) The first request of a notification: its shared block is encoded (every field a lookup in
    // the encoder's table, then the block kept). Two notifications alternate, so every request is
    // the first of its notification since the last; their fields are already in the dynamic table
    // (a connection that has sent them before), so the block is all indices and stays cacheable.
    Benchmark("APNs wire: header block, shared block encoded (first request of a notification)") { benchmark in
        var writer = fixture.connectedWriter()
        var buffer = ByteBufferAllocator().buffer(capacity: 1024)
        let notifications = [fixture.notification, fixture.otherNotification]
        for index in 0..<4 { writer.writeHeaderBlock(to: fixture.token, of: notifications[index & 1], into: &buffer) }
        var index = 0
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            buffer.clear()
            writer.writeHeaderBlock(to: fixture.token, of: notifications[index & 1], into: &buffer)
            index &+= 1
            blackHole(buffer.readableBytes)
        }
    }

    // (c) One device's complete frames, HEADERS + DATA (payload copied), into a reused buffer.
    Benchmark("APNs wire: HEADERS + DATA for one device, reused buffer") { benchmark in
        var writer = fixture.connectedWriter()
        var buffer = ByteBufferAllocator().buffer(capacity: 1024)
        for _ in 0..<2 { writer.writeRequest(to: fixture.token, of: fixture.notification, into: &buffer) }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            buffer.clear()
            writer.writeRequest(to: fixture.token, of: fixture.notification, into: &buffer)
            blackHole(buffer.readableBytes)
        }
    }

    // (d) A batch of 100 devices (the pool's default stream limit) as `sendQueuedWork` writes it: one
    // outbound buffer per batch, allocated at 16 KiB as the handler's `outboundBuffer` does (the
    // buffer is handed to the channel at the flush, so the next batch starts a new one); the batch
    // is over 32 KiB, so it grows twice. One operation here is the whole batch of 100.
    Benchmark("APNs wire: batch of 100 devices into one new buffer (op = 100 requests)", configuration: longOperation) { benchmark in
        var writer = fixture.connectedWriter()
        let allocator = ByteBufferAllocator()
        var warm = allocator.buffer(capacity: 1024)
        for _ in 0..<2 { writer.writeRequest(to: fixture.token, of: fixture.notification, into: &warm) }
        let devices = fixture.batchTokens
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            var buffer = allocator.buffer(capacity: 16 * 1024)
            for device in devices {
                writer.writeRequest(to: device, of: fixture.notification, into: &buffer)
            }
            blackHole(buffer)
        }
    }

    // (d') The same batch into a buffer kept from batch to batch (cleared, never regrown): what (d)
    // would cost if the handler did not start a new 16 KiB buffer per batch.
    Benchmark("APNs wire: batch of 100 devices into a reused buffer (op = 100 requests)", configuration: longOperation) { benchmark in
        var writer = fixture.connectedWriter()
        var buffer = ByteBufferAllocator().buffer(capacity: 64 * 1024)
        for _ in 0..<2 { writer.writeRequest(to: fixture.token, of: fixture.notification, into: &buffer) }
        let devices = fixture.batchTokens
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            buffer.clear()
            for device in devices {
                writer.writeRequest(to: device, of: fixture.notification, into: &buffer)
            }
            blackHole(buffer.readableBytes)
        }
    }

    // (e) The other half of a device's exchange: 100 answers (`:status: 200` and an `apns-id`, the
    // HEADERS frame APNs sends for an accepted notification) arriving in one read, cut into frames by
    // the client's parser and decoded as the handler does. One operation is the 100 answers.
    Benchmark("APNs wire: read 100 answers of 200 from one read (op = 100 answers)", configuration: longOperation) { benchmark in
        var reader = APNsAnswerReader()
        let answers = fixture.answers
        var warm = answers
        var statusSum = 0
        do {
            try reader.read(&warm) { statusSum &+= $0.status ?? 0 }
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations {
                var bytes = answers
                try reader.read(&bytes) { statusSum &+= $0.status ?? 0 }
            }
        } catch {
            fatalError("reading answers: \(error)")
        }
        blackHole(statusSum)
    }

    // MARK: Old path (NIOHTTP2, before issue #7), for comparison

    // What the client ran before it spoke HTTP/2 itself: NIO's `HPACKEncoder`, `HTTP2Frame` values and
    // `NIOHTTP2Handler`. Kept to show what the rewrite bought; the client no longer runs any of it.


    // The header block of one request, encoded by a connection's long-lived encoder (its dynamic
    // table warm, as on a real connection after the first request).
    // The closure runs once per sample: a new encoder is warmed with a few blocks first, so that the
    // one measured is a steady-state block, not a new encoder's second.
    Benchmark("Old path: NIO HPACKEncoder, APNs request headers", configuration: longOperation) { benchmark in
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var buffer = ByteBufferAllocator().buffer(capacity: 1024)
        let headers = fixture.requestHeaders()
        for _ in 0..<20 {
            buffer.clear()
            try? encoder.encode(headers: headers, to: &buffer)
        }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            buffer.clear()
            try? encoder.encode(headers: headers, to: &buffer)
            blackHole(buffer.readableBytes)
        }
    }

    // Building the header list and the two frame values for one device, as `write(...)` does.
    Benchmark("Old path: HTTP2Frame values, HEADERS + DATA for one device") { benchmark in
        var streamID = 1
        for _ in benchmark.scaledIterations {
            let id = HTTP2StreamID(streamID)
            streamID &+= 2
            let headers = fixture.requestHeaders()
            let headersFrame = HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers)))
            let data = HTTP2Frame.FramePayload.Data(data: .byteBuffer(fixture.payload), endStream: true)
            let dataFrame = HTTP2Frame(streamID: id, payload: .data(data))
            blackHole(headersFrame)
            blackHole(dataFrame)
        }
    }

    // One notification through the client's `NIOHTTP2Handler` (same settings as the pool): the two
    // frames written and serialised to bytes (HPACK included), then the 200 answer parsed and the
    // stream closed. No TLS, no socket: an EmbeddedChannel.
    Benchmark("Old path: NIOHTTP2Handler, one notification, write + 200 answer", configuration: longOperation) { benchmark in
        let channel = EmbeddedChannel()
        do {
            try channel.pipeline.syncOperations.addHandler(
                NIOHTTP2Handler(
                    mode: .client,
                    initialSettings: [
                        HTTP2Setting(parameter: .enablePush, value: 0),
                        HTTP2Setting(parameter: .maxConcurrentStreams, value: 100),
                        HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
                        HTTP2Setting(parameter: .maxHeaderListSize, value: 1 << 16),
                    ]))
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
            // The server's SETTINGS and its ACK of ours.
            var handshake = channel.allocator.buffer(capacity: 32)
            handshake.writeFrameHeader(length: 0, type: 0x4, flags: 0, streamID: 0)
            handshake.writeFrameHeader(length: 0, type: 0x4, flags: 0x1, streamID: 0)
            try channel.writeInbound(handshake)
            while try channel.readOutbound(as: ByteBuffer.self) != nil {}
        } catch {
            fatalError("HTTP/2 handshake: \(error)")
        }
        let payloadSize = fixture.payload.readableBytes
        var answer = channel.allocator.buffer(capacity: 32)
        var streamID: Int32 = 1

        func send() throws {
            let id = HTTP2StreamID(streamID)
            let headers = fixture.requestHeaders()
            channel.write(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers))), promise: nil)
            let data = HTTP2Frame.FramePayload.Data(data: .byteBuffer(fixture.payload), endStream: true)
            channel.write(HTTP2Frame(streamID: id, payload: .data(data)), promise: nil)
            channel.flush()
            while let bytes = try channel.readOutbound(as: ByteBuffer.self) { blackHole(bytes) }
            // `:status: 200` (HPACK static index 8) with END_STREAM | END_HEADERS, and the
            // connection window given back.
            answer.clear()
            answer.writeFrameHeader(length: 1, type: 0x1, flags: 0x5, streamID: streamID)
            answer.writeInteger(UInt8(0x88))
            answer.writeFrameHeader(length: 4, type: 0x8, flags: 0, streamID: 0)
            answer.writeInteger(UInt32(payloadSize))
            try channel.writeInbound(answer)
            while let frame = try channel.readInbound(as: HTTP2Frame.self) { blackHole(frame) }
            streamID += 2
        }

        do {
            for _ in 0..<100 { try send() }  // warm the HPACK table and the handler's buffers
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations { try send() }
            benchmark.stopMeasurement()
            _ = try channel.finish()
        } catch {
            fatalError("HTTP/2 benchmark: \(error)")
        }
    }

    // MARK: Auth

    // One provider token (ES256 JWT): done about once an hour per connection pool, so this is
    // here to show it is not worth caching harder, not because it is on the hot path.
    Benchmark("JWT: ProviderTokenSigner.sign", configuration: .init(scalingFactor: .one)) { benchmark in
        let signer: ProviderTokenSigner
        do {
            signer = try ProviderTokenSigner(
                privateKey: P256.Signing.PrivateKey(), keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        } catch {
            fatalError("signer: \(error)")
        }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try? signer.sign(issuedAt: fixedNow))
        }
    }

    // MARK: Validation

    Benchmark("DeviceToken(hex:) 64 hex digits") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try? DeviceToken(hex: tokenHex))
        }
    }

    Benchmark("Payload(jsonBytes:) 133-byte alert", configuration: longOperation) { benchmark in
        let bytes = Array(payloadJSON.utf8)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try? Payload(jsonBytes: bytes))
        }
    }

    // The pushd-compatible UDP notification: strict JSON, every field checked, a `NotificationRequest` built.
    Benchmark("UDP: NotificationDatagram.parse", configuration: longOperation) { benchmark in
        let id: RequestID
        do { id = try RequestID("bench-1") } catch { fatalError("\(error)") }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try? NotificationDatagram.parse(notificationDatagram, id: id, receivedAt: fixedNow))
        }
    }

    // MARK: Dispatcher, per device

    let request: NotificationRequest
    do {
        request = NotificationRequest(
            id: try RequestID("bench-1"), groups: ["customers"], pushType: .alert, priority: .immediate,
            expiration: .at(epochSeconds: 1_900_000_000), payload: try Payload(jsonString: payloadJSON), createdAt: fixedNow)
    } catch {
        fatalError("\(error)")
    }
    let policy = RetryPolicy()
    let apnsID = "5E1D3A4B-0C2F-4E8A-9B7D-6F1A2C3D4E5F"

    // The public pieces `OutcomeDisposition.decide` uses, for an accepted answer: classify the answer
    // into an `APNsOutcome`, then the retry policy's (trivial) verdict.
    Benchmark("Dispatch pieces: 200 answered + RetryPolicy.decide") { benchmark in
        var generator = SystemRandomNumberGenerator()
        for _ in benchmark.scaledIterations {
            let outcome = APNsOutcome.answered(
                status: 200, reason: nil, apnsID: apnsID, apnsUniqueID: nil, invalidatedAtMilliseconds: nil)
            let decision = policy.decide(
                after: outcome.outcomeClass, attempt: 1, expiration: request.expiration,
                firstAttemptAt: request.createdAt, now: fixedNow, using: &generator)
            blackHole(decision)
        }
    }

    // The same for a 429 TooManyRequests: the retry path (deadline, back-off with jitter).
    Benchmark("Dispatch pieces: 429 answered + RetryPolicy.decide") { benchmark in
        var generator = SystemRandomNumberGenerator()
        for _ in benchmark.scaledIterations {
            let outcome = APNsOutcome.answered(
                status: 429, reason: .tooManyRequests, apnsID: apnsID, apnsUniqueID: nil, invalidatedAtMilliseconds: nil)
            let decision = policy.decide(
                after: outcome.outcomeClass, attempt: 1, expiration: request.expiration,
                firstAttemptAt: request.createdAt, now: fixedNow, using: &generator)
            blackHole(decision)
        }
    }

    // `OutcomeDisposition.decide` itself (compiled from the root's source file, see DispatchStepMirror).
    Benchmark("Dispatch step: OutcomeDisposition.decide, 200") { benchmark in
        var generator = SystemRandomNumberGenerator()
        let outcome = APNsOutcome.answered(
            status: 200, reason: nil, apnsID: apnsID, apnsUniqueID: nil, invalidatedAtMilliseconds: nil)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(
                DispatchStep.decide(
                    outcome, token: fixture.token, attempt: 1, request: request, policy: policy, now: fixedNow,
                    using: &generator))
        }
    }

    Benchmark("Dispatch step: OutcomeDisposition.decide, 429 retry") { benchmark in
        var generator = SystemRandomNumberGenerator()
        let outcome = APNsOutcome.answered(
            status: 429, reason: .tooManyRequests, apnsID: apnsID, apnsUniqueID: nil, invalidatedAtMilliseconds: nil)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(
                DispatchStep.decide(
                    outcome, token: fixture.token, attempt: 1, request: request, policy: policy, now: fixedNow,
                    using: &generator))
        }
    }
}
