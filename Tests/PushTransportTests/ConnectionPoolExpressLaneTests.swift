import NIOCore
import Testing

@testable import PushTransport

/// A request of the pool's express lane (``PoolableRequest/isExpress``) or of its bulk work.
struct LaneRequest: PoolableRequest, Hashable {
    let poolRequestID: UInt64
    let deadline: NIODeadline
    let isExpress: Bool
}

/// The express lane: one-device requests never wait behind a broadcast's streams in one connection.
@Suite("Connection pool state machine: the express lane")
struct ConnectionPoolExpressLaneTests {
    typealias Machine = ConnectionPoolStateMachine<LaneRequest>
    let now = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func bulk(_ range: Range<UInt64>) -> [LaneRequest] {
        range.map { LaneRequest(poolRequestID: $0, deadline: now + .seconds(30), isExpress: false) }
    }

    func express(_ id: UInt64) -> [LaneRequest] {
        [LaneRequest(poolRequestID: id, deadline: now + .seconds(30), isExpress: true)]
    }

    /// Two connections of `streams` each, established: connection 0 filled by bulk work (so that 1 was
    /// opened), then emptied; connection 1 holding one bulk request (id 200).
    func twoConnections(streams: Int) -> Machine {
        var machine = Machine(configuration: .init(maximumConnections: 3))
        _ = machine.submit(bulk(100..<(100 + UInt64(streams))))
        _ = machine.connectionEstablished(0, availableStreams: streams)
        _ = machine.pull(connection: 0, released: 0, maximum: streams)
        #expect(machine.submit(bulk(200..<201)).connect == 1, "connection 0 is full: a second opens")
        _ = machine.connectionEstablished(1, availableStreams: streams)
        _ = machine.pull(connection: 1, released: 0, maximum: streams)
        let (after, _) = machine.pull(connection: 0, released: streams, maximum: streams)
        #expect(after.isEmpty)
        return machine
    }

    @Test("with one connection, express and bulk requests share it, express first")
    func oneConnectionTakesBoth() {
        var machine = Machine(configuration: .init(maximumConnections: 1))
        _ = machine.submit(bulk(0..<3) + express(9))
        _ = machine.connectionEstablished(0, availableStreams: 2)
        let (taken, _) = machine.pull(connection: 0, released: 0, maximum: 2)
        #expect(taken.map(\.poolRequestID) == [9, 0])
        #expect(machine.queuedCount == 2)
    }

    @Test("with two connections, the oldest takes express requests only; a broadcast goes to the others")
    func theExpressConnectionTakesNoBulkWork() {
        var machine = twoConnections(streams: 4)
        // A broadcast: connection 0 (the express one) is parked with free streams, but is not woken for it.
        let burst = machine.submit(bulk(10..<20))
        #expect(!burst.wake.contains(0))
        let (onExpress, _) = machine.pull(connection: 0, released: 0, maximum: 4)
        #expect(onExpress.isEmpty)
        let (onBulk, _) = machine.pull(connection: 1, released: 1, maximum: 4)
        #expect(onBulk.map(\.poolRequestID) == [10, 11, 12, 13])
        // A single while the broadcast fills connection 1 (and waits in the queue): connection 0 is woken.
        let single = machine.submit(express(99))
        #expect(single.wake == [0])
        let (taken, _) = machine.pull(connection: 0, released: 0, maximum: 4)
        #expect(taken.map(\.poolRequestID) == [99])
    }

    @Test("a bulk connection freeing a stream does not take an express request the express connection can carry")
    func bulkConnectionsLeaveExpressRequests() {
        var machine = twoConnections(streams: 4)
        _ = machine.submit(bulk(10..<20))
        _ = machine.pull(connection: 1, released: 1, maximum: 4)
        _ = machine.submit(express(99))
        // Connection 1 pulls first (an answer came back): it takes the broadcast's next, not the single.
        let (onBulk, _) = machine.pull(connection: 1, released: 1, maximum: 1)
        #expect(onBulk.map(\.poolRequestID) == [14])
        let (onExpress, _) = machine.pull(connection: 0, released: 0, maximum: 4)
        #expect(onExpress.map(\.poolRequestID) == [99])
    }

    @Test("when the express connection is full, express requests go to the others before bulk work")
    func expressOverflow() {
        var machine = twoConnections(streams: 2)
        _ = machine.submit(express(90) + express(91))
        let (first, _) = machine.pull(connection: 0, released: 0, maximum: 2)
        #expect(first.map(\.poolRequestID) == [90, 91])
        _ = machine.submit(bulk(10..<12) + express(92))
        let (onBulk, _) = machine.pull(connection: 1, released: 1, maximum: 2)
        #expect(onBulk.map(\.poolRequestID) == [92, 10])
    }

    @Test("bulk demand the express connection cannot take opens another connection")
    func bulkDemandOpensConnections() {
        var machine = twoConnections(streams: 2)
        _ = machine.submit(bulk(10..<11))
        _ = machine.pull(connection: 1, released: 0, maximum: 2)
        // Connection 1 full, connection 0 free but express only: a third opens for the bulk work.
        let actions = machine.submit(bulk(11..<13))
        #expect(actions.connect == 2)
    }

    @Test("withdraw, cancel and deadlines reach express requests too")
    func bookkeepingCoversBothLanes() {
        var machine = Machine(configuration: .init(maximumConnections: 1))
        _ = machine.submit(bulk(0..<2) + express(9) + express(8))
        #expect(machine.withdrawQueued(requestIDs: [9, 1]).map(\.poolRequestID).sorted() == [1, 9])
        #expect(machine.cancelQueued(requestID: 8)?.poolRequestID == 8)
        #expect(machine.queuedCount == 1)
        _ = machine.submit(express(7))
        let expired = machine.tick(now: now + .seconds(31))
        #expect(expired.fail.map(\.0.poolRequestID).sorted() == [0, 7])
        #expect(machine.queuedCount == 0)
    }
}
