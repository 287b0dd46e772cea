import APNsTransport
import Logging
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import PushTransport
import PushgateCore
import Testing

@testable import APNsHTTP2

/// The handler on an `EmbeddedChannel`, with the server's side written by hand: what only a hostile or
/// unusual server would do (tiny flow-control windows, pings) is checked here, byte by byte.
@Suite("APNs connection handler: HTTP/2 on the wire")
struct APNsConnectionHandlerTests {
    final class Delegate: APNsConnectionDelegate, @unchecked Sendable {
        var work: [PooledRequest] = []
        var ready: Int?
        var closed = false
        func connectionReady(_ id: Int, capacity: Int) { ready = capacity }
        func connectionCapacityChanged(_ id: Int, capacity: Int) { ready = capacity }
        func connectionRetiring(_ id: Int) {}
        func connectionClosed(_ id: Int, everReady: Bool, error: String?) { closed = true }
        func pull(connection id: Int, released: Int, maximum: Int) -> [PooledRequest] {
            let taken = Array(work.prefix(maximum))
            work.removeFirst(taken.count)
            return taken
        }
        var requeued: [PushTransportFailure] = []
        func requeue(_ requests: [PooledRequest], because failure: PushTransportFailure) {
            requeued += requests.map { _ in failure }
        }
        func providerToken() throws -> ProviderToken? { nil }
        func providerTokenRejectedAsExpired(_ token: ProviderToken) {}
        func streamAnswered(roundTrip: TimeAmount) {}
    }

    final class Outcomes: APNsOutcomeReceiver, @unchecked Sendable {
        var received: [APNsOutcome] = []
        func receive(_ outcome: APNsOutcome, for request: APNsRequest) { received.append(outcome) }
    }

    /// A handler on a connected `EmbeddedChannel`, as the pool sets one up; its preface is unread.
    func connectedHandler() throws -> (EmbeddedChannel, Delegate, APNsConnectionHandler) {
        let channel = EmbeddedChannel()
        let delegate = Delegate()
        let handler = APNsConnectionHandler(
            connectionID: 1,
            delegate: delegate,
            configuration: .init(connection: .init(), authority: "apns.test", logger: Logger(label: "test")),
            now: channel.eventLoop.now
        )
        try channel.pipeline.syncOperations.addHandler(handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        return (channel, delegate, handler)
    }

    func serverFrame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8]) -> ByteBuffer {
        var buffer = ByteBuffer()
        HTTP2Wire.writeFrameHeader(
            length: payload.count,
            type: HTTP2Wire.FrameType(rawValue: type)!,
            flags: flags,
            streamID: stream,
            into: &buffer
        )
        buffer.writeBytes(payload)
        return buffer
    }

    /// Everything the client wrote since the last call, as frames (the preface stripped once).
    func clientFrames(_ channel: EmbeddedChannel, parser: inout HTTP2FrameParser) throws -> [HTTP2InboundFrame] {
        var frames: [HTTP2InboundFrame] = []
        while var bytes = try channel.readOutbound(as: ByteBuffer.self) {
            if bytes.readableBytesView.starts(with: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) {
                bytes.moveReaderIndex(forwardBy: 24)
            }
            parser.append(&bytes)
            while let frame = try parser.nextFrame() { frames.append(frame) }
        }
        return frames
    }

    @Test(
        "a 25-byte payload through a 10-byte stream window: DATA waits for WINDOW_UPDATE; PING and SETTINGS are acknowledged"
    )
    func flowControlAndAcknowledgements() throws {
        let (channel, delegate, handler) = try connectedHandler()
        var parser = HTTP2FrameParser()
        let opening = try clientFrames(channel, parser: &parser)
        guard case .settings(let settings) = opening.first else {
            Issue.record("no SETTINGS after the preface: \(opening)")
            return
        }
        #expect(settings.contains { $0.parameter == 0x2 && $0.value == 0 }, "server push disabled")
        #expect(
            opening.contains(
                .windowUpdate(streamID: 0, increment: UInt32(APNsConnectionHandler.initialConnectionWindowIncrement))
            )
        )

        // The server: at most 10 streams, 10-byte stream windows.
        try channel.writeInbound(serverFrame(0x4, [0, 0x3, 0, 0, 0, 10, 0, 0x4, 0, 0, 0, 10]))
        #expect(delegate.ready == 10)
        #expect(try clientFrames(channel, parser: &parser) == [.settingsAcknowledged])

        let outcomes = Outcomes()
        let token = try DeviceToken(hex: String(repeating: "ab", count: 32))
        let notification = PreparedNotification(
            try NotificationContent(
                topic: Topic("com.example.app"),
                pushType: .alert,
                priority: .immediate,
                payload: Payload(jsonString: #"{"aps":{"alert":"hello"}}"#)
            )
        )
        delegate.work = [
            PooledRequest(
                request: APNsRequest(notification: notification, deviceToken: token, receiver: outcomes),
                poolRequestID: 1,
                deadline: .now() + .seconds(60)
            )
        ]
        handler.wake()
        let sent = try clientFrames(channel, parser: &parser)
        #expect(sent.count == 2)
        guard case .headers(1, var block, false) = sent.first else {
            Issue.record("expected HEADERS on stream 1: \(sent)")
            return
        }
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        let headers = try decoder.decodeHeaders(from: &block)
        #expect(headers[":path"] == ["/3/device/" + token.hex])
        #expect(headers[":authority"] == ["apns.test"])
        #expect(headers["apns-topic"] == ["com.example.app"])
        #expect(
            sent.last
                == .data(
                    streamID: 1,
                    data: ByteBuffer(string: #"{"aps":{"a"#),
                    endStream: false,
                    flowControlledLength: 10
                )
        )

        // PING is answered with the same data; the window update releases the rest of the payload.
        try channel.writeInbound(serverFrame(0x6, [1, 2, 3, 4, 5, 6, 7, 8]))
        try channel.writeInbound(serverFrame(0x8, stream: 1, [0, 0, 0, 100]))
        let after = try clientFrames(channel, parser: &parser)
        #expect(after.contains(.ping(0x0102_0304_0506_0708, ack: true)))
        #expect(
            after.contains(
                .data(
                    streamID: 1,
                    data: ByteBuffer(string: #"lert":"hello"}}"#),
                    endStream: true,
                    flowControlledLength: 15
                )
            )
        )

        // `:status: 200` (static index 8) ends the stream: the outcome is delivered.
        try channel.writeInbound(serverFrame(0x1, flags: 0x5, stream: 1, [0x88]))
        #expect(outcomes.received.count == 1)
        #expect(outcomes.received.first?.outcomeClass == .accepted)
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test(
        "answers read without the HPACK decoder and answers decoded by it share one table: an id indexed by one is found by a later one"
    )
    func answersKeepTheHPACKTableInStep() throws {
        let (channel, delegate, handler) = try connectedHandler()
        var parser = HTTP2FrameParser()
        _ = try clientFrames(channel, parser: &parser)
        try channel.writeInbound(serverFrame(0x4, [0, 0x3, 0, 0, 0, 10]))

        let outcomes = Outcomes()
        let notification = PreparedNotification(
            try NotificationContent(
                topic: Topic("com.example.app"),
                pushType: .alert,
                priority: .immediate,
                payload: Payload(jsonString: #"{"aps":{}}"#)
            )
        )
        let sentID = try APNsID("11111111-2222-4333-8444-555555555555")
        delegate.work = try (1...5).map { index in
            PooledRequest(
                request: APNsRequest(
                    notification: notification,
                    deviceToken: try DeviceToken(hex: String(repeating: "0\(index)", count: 32)),
                    apnsID: index == 4 ? sentID : nil,
                    tag: UInt64(index),
                    receiver: outcomes
                ),
                poolRequestID: UInt64(index),
                deadline: .now() + .seconds(60)
            )
        }
        handler.wake()
        let requests = try clientFrames(channel, parser: &parser).filter {
            if case .headers = $0 { return true } else { return false }
        }
        #expect(requests.count == 5)

        func literal(_ string: String) -> [UInt8] { [UInt8(string.utf8.count)] + Array(string.utf8) }
        let first = "aaaaaaaa-0000-4000-8000-000000000001"
        let second = "bbbbbbbb-0000-4000-8000-000000000002"
        // Stream 1: `apns-id` with incremental indexing (dynamic entry 62): read without the decoder, which is given the insertion.
        try channel.writeInbound(
            serverFrame(0x1, flags: 0x5, stream: 1, [0x88, 0x40] + literal("apns-id") + literal(first))
        )
        // Stream 3: a literal without indexing: read without the decoder.
        try channel.writeInbound(
            serverFrame(0x1, flags: 0x5, stream: 3, [0x88, 0x00] + literal("apns-id") + literal(second))
        )
        // Stream 5: dynamic index 62 (the decoder's path) must still be stream 1's id.
        try channel.writeInbound(serverFrame(0x1, flags: 0x5, stream: 5, [0x88, 0xbe]))
        // Stream 7: the request's own id echoed.
        try channel.writeInbound(
            serverFrame(0x1, flags: 0x5, stream: 7, [0x88, 0x00] + literal("apns-id") + literal(sentID.value))
        )
        // Stream 9: 410 as a literal, its reason in DATA.
        try channel.writeInbound(
            serverFrame(
                0x1,
                flags: 0x4,
                stream: 9,
                [0x08] + literal("410") + [0x00] + literal("apns-id") + literal(second)
            )
        )
        try channel.writeInbound(
            serverFrame(0x0, flags: 0x1, stream: 9, Array(#"{"reason":"Unregistered","timestamp":1700000000000}"#.utf8))
        )

        #expect(outcomes.received.map(\.apnsID) == [first, second, first, sentID.value, second])
        #expect(outcomes.received.map(\.status) == [200, 200, 200, 200, 410])
        #expect(outcomes.received.last?.outcomeClass == .rejected)
        #expect(outcomes.received.last?.reason == .unregistered)
        #expect(outcomes.received.last?.invalidatedAtMilliseconds == 1_700_000_000_000)
        #expect(channel.isActive)
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test("ExpiredProviderToken: the request is sent again once, labelled credentialRefused (not streamRefused)")
    func expiredProviderTokenResendHasItsOwnLabel() throws {
        let (channel, delegate, handler) = try connectedHandler()
        var parser = HTTP2FrameParser()
        _ = try clientFrames(channel, parser: &parser)
        try channel.writeInbound(serverFrame(0x4, [0, 0x3, 0, 0, 0, 10]))
        let outcomes = Outcomes()
        let notification = PreparedNotification(
            try NotificationContent(
                topic: Topic("com.example.app"),
                pushType: .alert,
                priority: .immediate,
                payload: Payload(jsonString: #"{"aps":{}}"#)
            )
        )
        delegate.work = [
            PooledRequest(
                request: APNsRequest(
                    notification: notification,
                    deviceToken: try DeviceToken(hex: String(repeating: "01", count: 32)),
                    receiver: outcomes
                ),
                poolRequestID: 1,
                deadline: .now() + .seconds(60)
            )
        ]
        handler.wake()
        _ = try clientFrames(channel, parser: &parser)
        func literal(_ string: String) -> [UInt8] { [UInt8(string.utf8.count)] + Array(string.utf8) }
        try channel.writeInbound(serverFrame(0x1, flags: 0x4, stream: 1, [0x08] + literal("403")))
        try channel.writeInbound(
            serverFrame(0x0, flags: 0x1, stream: 1, Array(#"{"reason":"ExpiredProviderToken"}"#.utf8))
        )
        #expect(delegate.requeued == [.credentialRefused])
        #expect(outcomes.received.isEmpty, "resent, not answered")
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test("a frame the server must not send: GOAWAY with PROTOCOL_ERROR, then the connection closes")
    func protocolErrorClosesWithGoAway() throws {
        let (channel, delegate, _) = try connectedHandler()
        var parser = HTTP2FrameParser()
        _ = try clientFrames(channel, parser: &parser)
        try channel.writeInbound(serverFrame(0x5, flags: 0x4, stream: 1, [0, 0, 0, 2]))  // PUSH_PROMISE
        let frames = try clientFrames(channel, parser: &parser)
        guard case .goAway(_, let code, _) = frames.last else {
            Issue.record("expected GOAWAY: \(frames)")
            return
        }
        #expect(code == HTTP2Wire.ErrorCode.protocolError.rawValue)
        #expect(!channel.isActive)
        #expect(delegate.closed)
    }
}
