import APNsTransport
import NIOCore
import NIOEmbedded
import PushTransport
import PushgateCore
import Synchronization
import Testing

@testable import APNsLegacy

/// The connection handler on an `EmbeddedChannel`: what it writes, in how many flushes, and what it
/// does with error responses, quiet time and a lost connection. The pool is a recording stand-in.
@Suite("Legacy connection handler")
struct LegacyConnectionHandlerTests {
    final class Pool: LegacyConnectionDelegate {
        struct State {
            var queue: [LegacyPooledRequest] = []
            var ready = 0
            var retiring = 0
            var closed = 0
            var released = 0
            var resent: [UInt64] = []
        }
        let state = Mutex(State())

        func connectionReady(_ id: Int) { state.withLock { $0.ready += 1 } }
        func connectionRetiring(_ id: Int) { state.withLock { $0.retiring += 1 } }
        func connectionClosed(_ id: Int, everReady: Bool, error: String?) { state.withLock { $0.closed += 1 } }
        func pull(connection id: Int, released: Int, maximum: Int) -> [LegacyPooledRequest] {
            state.withLock { state in
                state.released += released
                let taken = Array(state.queue.prefix(maximum))
                state.queue.removeFirst(taken.count)
                return taken
            }
        }
        func resend(_ requests: [LegacyPooledRequest]) { state.withLock { $0.resent += requests.map(\.request.tag) } }
    }

    final class Outcomes: APNsOutcomeReceiver {
        let byTag = Mutex<[UInt64: APNsOutcome]>([:])
        func receive(_ outcome: APNsOutcome, for request: APNsRequest) { byTag.withLock { $0[request.tag] = outcome } }
    }

    struct Fixture {
        let channel = EmbeddedChannel()
        let pool = Pool()
        let outcomes = Outcomes()
        let handler: LegacyConnectionHandler

        init(queued count: Int, quietTime: TimeAmount = .seconds(1), windowSize: Int = 100) throws {
            handler = LegacyConnectionHandler(
                connectionID: 1,
                delegate: pool,
                window: LegacyConnectionStateMachine(quietTime: quietTime),
                windowSize: windowSize,
                tickInterval: .milliseconds(10),
                logger: .init(label: "test")
            )
            let notification = PreparedNotification(
                try NotificationContent(
                    topic: Topic("com.example.app"),
                    pushType: .alert,
                    priority: .immediate,
                    payload: smallPayload
                )
            )
            let outcomes = self.outcomes
            pool.state.withLock { state in
                state.queue = (1...count).map {
                    LegacyPooledRequest(
                        request: APNsRequest(
                            notification: notification,
                            deviceToken: token32,
                            tag: UInt64($0),
                            receiver: outcomes
                        ),
                        poolRequestID: UInt64($0),
                        deadline: .distantFuture
                    )
                }
            }
            try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LegacyErrorResponseDecoder()))
            try channel.pipeline.syncOperations.addHandler(handler)
            try channel.connect(to: .init(ipAddress: "127.0.0.1", port: 2195)).wait()
        }

        /// The frames written, one `ByteBuffer` per flush.
        func flushes() throws -> [ByteBuffer] {
            var buffers: [ByteBuffer] = []
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { buffers.append(buffer) }
            return buffers
        }

        func outcome(_ tag: UInt64) -> APNsOutcome? { outcomes.byTag.withLock { $0[tag] } }
    }

    /// Identifiers of the frames in `buffer`, read with item 3 of each frame.
    static func identifiers(in buffer: ByteBuffer) -> [UInt32] {
        var buffer = buffer
        var identifiers: [UInt32] = []
        while let command = buffer.readInteger(as: UInt8.self), command == 2,
            let length = buffer.readInteger(as: UInt32.self),
            var frame = buffer.readSlice(length: Int(length))
        {
            while let item = frame.readInteger(as: UInt8.self), let itemLength = frame.readInteger(as: UInt16.self) {
                if item == 3 { identifiers.append(frame.getInteger(at: frame.readerIndex, as: UInt32.self)!) }
                frame.moveReaderIndex(forwardBy: Int(itemLength))
            }
        }
        return identifiers
    }

    @Test("nothing is written before the TLS handshake; then the whole window goes out in one flush, numbered from 1")
    func oneFlushPerBatch() throws {
        let fixture = try Fixture(queued: 250, windowSize: 200)
        fixture.handler.wake()
        #expect(try fixture.flushes().isEmpty)
        fixture.handler.handshakeCompleted()
        #expect(fixture.pool.state.withLock { $0.ready } == 1)
        fixture.handler.wake()
        let flushes = try fixture.flushes()
        #expect(flushes.count == 1)
        #expect(Self.identifiers(in: flushes[0]) == Array(1...200), "the window holds 200: the other 50 wait")
        #expect(fixture.pool.state.withLock { $0.queue.count } == 50)
    }

    @Test(
        "an error response: earlier ones delivered, the named one failed with its reason, later ones resent; the connection retires and closes"
    )
    func errorResponse() throws {
        let fixture = try Fixture(queued: 5)
        fixture.handler.handshakeCompleted()
        fixture.handler.wake()
        _ = try fixture.flushes()
        try fixture.channel.writeInbound(ByteBuffer(bytes: [8, 8, 0, 0, 0, 3]))
        #expect(fixture.outcome(1)?.isAccepted == true)
        #expect(fixture.outcome(2)?.isAccepted == true)
        #expect(fixture.outcome(3)?.reason == .badDeviceToken)
        #expect(fixture.outcome(3)?.outcomeClass == .rejected)
        #expect(fixture.outcome(4) == nil && fixture.outcome(5) == nil)
        #expect(fixture.pool.state.withLock { $0.resent } == [4, 5])
        #expect(fixture.pool.state.withLock { $0.retiring } == 1)
        #expect(!fixture.channel.isActive)
        #expect(fixture.pool.state.withLock { $0.closed } == 1)
    }

    @Test("quiet time on the event loop's clock confirms, and the confirmed are released to the pool at the next pull")
    func quietTime() throws {
        let fixture = try Fixture(queued: 3, quietTime: .milliseconds(500), windowSize: 2)
        fixture.handler.handshakeCompleted()
        fixture.handler.wake()
        #expect(Self.identifiers(in: try fixture.flushes()[0]) == [1, 2])
        fixture.channel.embeddedEventLoop.advanceTime(by: .milliseconds(490))
        #expect(fixture.outcome(1) == nil)
        fixture.channel.embeddedEventLoop.advanceTime(by: .milliseconds(20))
        #expect(fixture.outcome(1)?.isAccepted == true && fixture.outcome(2)?.isAccepted == true)
        #expect(fixture.outcome(1)?.status == 200)
        #expect(fixture.pool.state.withLock { $0.released } == 2)
        #expect(Self.identifiers(in: try fixture.flushes()[0]) == [3], "room again: the third goes out")
        try fixture.channel.close().wait()
    }

    @Test("closed without an error response: everything unconfirmed goes back to the pool, nothing is answered")
    func lostConnection() throws {
        let fixture = try Fixture(queued: 4)
        fixture.handler.handshakeCompleted()
        fixture.handler.wake()
        _ = try fixture.flushes()
        try fixture.channel.close().wait()
        #expect(fixture.pool.state.withLock { $0.resent } == [1, 2, 3, 4])
        #expect(fixture.outcomes.byTag.withLock { $0.isEmpty })
        #expect(fixture.pool.state.withLock { $0.closed } == 1)
    }
}
