import APNsTransport
import Logging
import NIOCore
import NIOEmbedded
import NIOSSL
import PushgateCore
import Synchronization
import Testing

@testable import PushTransport

/// The pool carries any push service's requests: a submission that is not an `APNsRequest`, failed
/// through the plug-in's own outcome path.
@Suite("Connection pool: any service's submissions")
struct ConnectionPoolSubmissionTests {
    /// Another service's message and the failures it was completed with.
    struct Message: TransportSubmission {
        let number: Int
        let deadline: NIODeadline?
        let recorder: Recorder

        func fail(_ failure: PushTransportFailure) {
            recorder.failures.withLock { $0.append((number, failure)) }
        }
    }

    final class Recorder: Sendable {
        let failures = Mutex<[(number: Int, failure: PushTransportFailure)]>([])
    }

    typealias PooledMessage = PoolEntry<Message, NoMarks>

    func pool(maximumQueued: Int) throws -> ConnectionPool<UnconnectedPlugin<PooledMessage>> {
        ConnectionPool(
            configuration: .init(
                endpoint: Endpoint(host: "127.0.0.1", port: 1),
                tlsContext: try NIOSSLContext(configuration: .makeClientConfiguration()),
                pool: .init(maximumConnections: 1, maximumQueued: maximumQueued),
                connectTimeout: .seconds(1),
                requestTimeout: .seconds(1),
                maximumResends: 0,
                tickInterval: .seconds(1),
                assumedStreamsPerConnection: 1
            ),
            plugin: UnconnectedPlugin(),
            group: EmbeddedEventLoop(),
            logger: Logger(label: "test")
        )
    }

    @Test("after shutdown, submitted messages are failed through their own type as shutdown, in order")
    func submissionsAfterShutdownFailThroughTheirOwnType() async throws {
        let pool = try pool(maximumQueued: 10)
        await pool.shutdown(grace: .seconds(1))
        let recorder = Recorder()
        let ids = pool.submit((1...3).map { Message(number: $0, deadline: nil, recorder: recorder) })
        #expect(ids.count == 3)
        #expect(Set(ids).count == 3)
        let failures = recorder.failures.withLock { $0 }
        #expect(failures.map(\.number) == [1, 2, 3])
        #expect(failures.allSatisfy { $0.failure == .shutdown })
    }
}
