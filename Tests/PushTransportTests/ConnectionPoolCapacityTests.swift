import APNsTransport
import Logging
import NIOCore
import NIOEmbedded
import NIOSSL
import PushgateCore
import Testing

@testable import PushTransport

/// The pool's in-flight capacity (what the dispatcher sizes its budget by) and when it opens another
/// connection. No connection is opened here: connection events are fed to the pool by hand.
/// A plug-in whose connections do nothing: connection events are fed to the pool by hand.
struct UnconnectedPlugin<Request: TransportPooledRequest>: TransportPlugin {
    final class NoConnection: PooledConnection, ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        func wake() {}
        func closeGracefully() {}
    }

    var serviceName: String { "test" }
    func makeConnection(_ context: TransportConnectionContext<Self>) -> NoConnection {
        NoConnection()
    }
}

@Suite("Connection pool: capacity follows the server")
struct ConnectionPoolCapacityTests {
    typealias NoRequest = PoolEntry<APNsRequest, NoMarks>

    typealias NoPlugin = UnconnectedPlugin<NoRequest>

    func pool(maximumConnections: Int, assumed: Int) throws -> ConnectionPool<NoPlugin> {
        ConnectionPool(
            configuration: .init(
                endpoint: Endpoint(host: "127.0.0.1", port: 1),
                tlsContext: try NIOSSLContext(configuration: .makeClientConfiguration()),
                pool: .init(maximumConnections: maximumConnections),
                connectTimeout: .seconds(1),
                requestTimeout: .seconds(1),
                maximumResends: 0,
                tickInterval: .seconds(1),
                assumedStreamsPerConnection: assumed
            ),
            plugin: NoPlugin(),
            group: EmbeddedEventLoop(),
            logger: Logger(label: "test")
        )
    }

    @Test("capacity is connections x streams: assumed at first, then what SETTINGS say, following changes")
    func capacityFollowsSettings() throws {
        let pool = try pool(maximumConnections: 16, assumed: 1000)
        #expect(pool.inFlightCapacity == 16_000)
        pool.connectionReady(0, capacity: 500)
        #expect(pool.inFlightCapacity == 8_000)
        pool.connectionCapacityChanged(0, capacity: 1)
        #expect(pool.inFlightCapacity == 16)
        pool.connectionCapacityChanged(0, capacity: 2000)
        #expect(pool.inFlightCapacity == 32_000)
    }
}

@Suite("Connection pool state machine: connection k+1")
struct ConnectionPoolGrowthTests {
    typealias Machine = ConnectionPoolStateMachine<TestRequest>
    let now = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func requests(_ range: Range<UInt64>) -> [TestRequest] {
        range.map { TestRequest(poolRequestID: $0, deadline: now + .seconds(30)) }
    }

    @Test("connection k+1 opens only while all k are full and work waits, never beyond the maximum")
    func opensTheNextConnectionOnlyWhenAllAreFullAndWorkWaits() {
        var machine = Machine(configuration: .init(maximumConnections: 2))
        #expect(machine.submit(requests(0..<2)).connect == 0)
        _ = machine.connectionEstablished(0, availableStreams: 3)
        let (first, _) = machine.pull(connection: 0, released: 0, maximum: 3)
        #expect(first.count == 2)
        // Connection 0 has a free stream: one more request goes to it, no new connection.
        let oneMore = machine.submit(requests(2..<3))
        #expect(oneMore.connect == nil)
        #expect(oneMore.wake.isEmpty || oneMore.wake == [0])
        let (second, _) = machine.pull(connection: 0, released: 0, maximum: 1)
        #expect(second.count == 1)
        // Connection 0 is full but nothing waits: still one connection.
        #expect(machine.connectionCount == 1)
        // Full and work waits: connection 1.
        #expect(machine.submit(requests(3..<4)).connect == 1)
        _ = machine.connectionEstablished(1, availableStreams: 1)
        let (third, _) = machine.pull(connection: 1, released: 0, maximum: 1)
        #expect(third.count == 1)
        // Both full, work waits, but the maximum is reached: no third connection.
        #expect(machine.submit(requests(4..<5)).connect == nil)
        #expect(machine.connectionCount == 2)
        #expect(machine.queuedCount == 1)
    }
}

@Suite("Connection pool state machine: bounded queue, deadline order")
struct ConnectionPoolBoundTests {
    typealias Machine = ConnectionPoolStateMachine<TestRequest>
    let now = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test("beyond maximumQueued, the excess fails at once as queueFull; what was queued stays")
    func excessIsPushedBack() {
        var machine = Machine(configuration: .init(maximumConnections: 1, maximumQueued: 3))
        let requests = (0..<5).map { TestRequest(poolRequestID: UInt64($0), deadline: now + .seconds(30)) }
        let actions = machine.submit(requests)
        #expect(actions.connect == 0)
        #expect(actions.fail.map(\.0.poolRequestID) == [3, 4])
        #expect(actions.fail.allSatisfy { $0.1 == .queueFull })
        #expect(machine.queuedCount == 3)
    }

    @Test("a tick before the earliest queued deadline touches nothing; expiry then recomputes it")
    func expiresByEarliestDeadline() {
        var machine = Machine(configuration: .init(maximumConnections: 1))
        _ = machine.submit([
            TestRequest(poolRequestID: 0, deadline: now + .seconds(30)),
            TestRequest(poolRequestID: 1, deadline: now + .seconds(5)),
        ])
        #expect(machine.earliestQueuedDeadline == now + .seconds(5))
        #expect(machine.tick(now: now + .seconds(4)).fail.isEmpty)
        let expired = machine.tick(now: now + .seconds(5))
        #expect(expired.fail.map(\.0.poolRequestID) == [1])
        #expect(machine.earliestQueuedDeadline == now + .seconds(30))
        #expect(machine.queuedCount == 1)
    }
}
