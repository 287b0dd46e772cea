import NIOCore
import Testing

@testable import PushTransport

@Suite("Connection pool state machine: an idle connection given up for another pool sharing a cap")
struct ConnectionPoolIdleReclaimTests {
    typealias Machine = ConnectionPoolStateMachine<TestRequest>
    let now = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func requests(_ range: Range<UInt64>) -> [TestRequest] {
        range.map { TestRequest(poolRequestID: $0, deadline: now + .seconds(30)) }
    }

    @Test("the oldest connection holding no request is retired and closed; busy ones are kept")
    func retiresAnIdleOne() {
        var machine = Machine(configuration: .init(maximumConnections: 3))
        _ = machine.submit(requests(0..<1))
        _ = machine.connectionEstablished(0, availableStreams: 1)
        _ = machine.pull(connection: 0, released: 0, maximum: 1)
        _ = machine.submit(requests(1..<2))
        _ = machine.connectionEstablished(1, availableStreams: 1)
        _ = machine.pull(connection: 1, released: 0, maximum: 1)
        // Connection 0 has its answer and parks; connection 1 still holds request 1.
        _ = machine.pull(connection: 0, released: 1, maximum: 1)
        let wanted = machine.idleConnectionWanted()
        #expect(wanted.close == [0])
        #expect(machine.activeConnectionCount == 1)
        // Connection 1 is busy: nothing more to give.
        #expect(machine.idleConnectionWanted().close.isEmpty)
        // A retired connection takes nothing new.
        _ = machine.submit(requests(2..<3))
        #expect(machine.pull(connection: 0, released: 0, maximum: 1).requests.isEmpty)
    }

    @Test("nothing is retired while shutting down, nor from a pool without connections")
    func nothingToGive() {
        var empty = Machine(configuration: .init(maximumConnections: 1))
        #expect(empty.idleConnectionWanted().isEmpty)
        var machine = Machine(configuration: .init(maximumConnections: 1))
        _ = machine.submit(requests(0..<1))
        _ = machine.connectionEstablished(0, availableStreams: 1)
        _ = machine.shutdown()
        #expect(machine.idleConnectionWanted().isEmpty)
    }
}
