import Logging
import NIOCore
import NIOEmbedded
import NIOSSL
import PushgateCore
import Synchronization
import Testing

@testable import PushTransport

/// The client front every transport client is built on: the pool made from the client's settings, and
/// an orderly shutdown. No connection is opened here.
@Suite("Transport client front")
struct TransportFrontTests {
    typealias Message = ConnectionPoolSubmissionTests.Message
    typealias Plugin = UnconnectedPlugin<PoolEntry<Message, NoMarks>>

    /// A configuration as the clients' are: `Duration`s, the pool's settings under the shared names.
    struct Settings: TransportClientSettings {
        var endpoint = Endpoint(host: "127.0.0.1", port: 1)
        var maximumConnections = 3
        var assumedStreamsPerConnection = 7
        var maximumQueuedRequests = 10
        var connectTimeout = Duration.seconds(1)
        var requestTimeout = Duration.seconds(1)
        var reconnectBaseDelay = Duration.milliseconds(100)
        var reconnectMaximumDelay = Duration.seconds(1)
        var maximumResends = 0
        var tickInterval = Duration.seconds(1)
        var shutdownGracePeriod = Duration.seconds(1)
        var eventLoopThreads = 1

        func makeTLSContext() throws -> NIOSSLContext {
            try NIOSSLContext(configuration: .makeClientConfiguration())
        }
    }

    func front(dependents: [@Sendable () async -> Void] = []) throws -> TransportFront<Message> {
        try TransportFront(
            settings: Settings(),
            plugin: Plugin(),
            loops: TransportEventLoops(EmbeddedEventLoop(), threads: 1),
            logger: Logger(label: "test"),
            dependents: dependents
        )
    }

    @Test("the pool is built from the client's settings: capacity is connections x assumed streams, nothing queued")
    func poolFollowsTheSettings() throws {
        let front = try front()
        #expect(front.inFlightCapacity == 3 * 7)
        #expect(front.statistics == TransportStatistics(queued: 0, connections: 0, activeConnections: 0, inFlight: 0))
        #expect(front.isReachable)
    }

    @Test("shutdown stops the pool, then the client's dependents in order; later submissions fail as shutdown")
    func shutdownStopsThePoolThenTheDependents() async throws {
        let order = Mutex<[String]>([])
        let front = try front(dependents: [
            { order.withLock { $0.append("bearer cache") } },
            { order.withLock { $0.append("token client") } },
        ])
        await front.shutdown()
        #expect(order.withLock { $0 } == ["bearer cache", "token client"])

        let recorder = ConnectionPoolSubmissionTests.Recorder()
        let ids = front.submit([Message(number: 1, deadline: nil, recorder: recorder)])
        #expect(ids.count == 1)
        #expect(front.withdraw(ids) == 0)
        let failures = recorder.failures.withLock { $0 }
        #expect(failures.map(\.number) == [1])
        #expect(failures.map(\.failure) == [.shutdown])
    }

    struct Marks: PoolEntryMarks {
        var resentOnce = false
    }

    @Test("a pool entry's marks start unset and read and write as the entry's own properties")
    func poolEntryMarks() {
        let recorder = ConnectionPoolSubmissionTests.Recorder()
        var entry = PoolEntry<Message, Marks>(
            request: Message(number: 1, deadline: nil, recorder: recorder),
            poolRequestID: 9,
            deadline: .now()
        )
        #expect(entry.resentOnce == false)
        #expect(entry.resends == 0)
        entry.resentOnce = true
        #expect(entry.marks.resentOnce)
        entry.fail(.cancelled)
        #expect(recorder.failures.withLock { $0.map(\.failure) } == [.cancelled])
    }
}
