import NIOCore
import Testing

@testable import PushTransport

struct TestRequest: PoolableRequest, Hashable {
    let poolRequestID: UInt64
    let deadline: NIODeadline
}

@Suite("Connection pool state machine")
struct ConnectionPoolStateMachineTests {
    typealias Machine = ConnectionPoolStateMachine<TestRequest>
    let now = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func requests(_ range: Range<UInt64>, deadline: NIODeadline? = nil) -> [TestRequest] {
        range.map { TestRequest(poolRequestID: $0, deadline: deadline ?? now + .seconds(30)) }
    }

    @Test func firstRequestOpensAConnectionAndWaitsForIt() {
        var machine = Machine(configuration: .init(maximumConnections: 2))
        let actions = machine.submit(requests(0..<1))
        #expect(actions.connect == 0)
        #expect(actions.wake.isEmpty)
        #expect(machine.queuedCount == 1)
        // More work while it connects does not open a second connection.
        #expect(machine.submit(requests(1..<5)).connect == nil)
    }

    @Test func anEstablishedConnectionIsWokenAndPullsUpToItsFreeStreams() {
        var machine = Machine(configuration: .init(maximumConnections: 1))
        _ = machine.submit(requests(0..<5))
        let ready = machine.connectionEstablished(0, availableStreams: 3)
        #expect(ready.wake == [0])
        let (taken, _) = machine.pull(connection: 0, released: 0, maximum: 3)
        #expect(taken.map(\.poolRequestID) == [0, 1, 2])
        #expect(machine.queuedCount == 2)
        #expect(machine.leasedCount == 3)
        // Two answers come back: two more go out.
        let (next, _) = machine.pull(connection: 0, released: 2, maximum: 2)
        #expect(next.map(\.poolRequestID) == [3, 4])
        #expect(machine.leasedCount == 3)
    }

    @Test func aConnectionThatFindsNoWorkIsParkedAndWokenOncePerBurst() {
        var machine = Machine(configuration: .init(maximumConnections: 1))
        _ = machine.submit(requests(0..<1))
        _ = machine.connectionEstablished(0, availableStreams: 100)
        _ = machine.pull(connection: 0, released: 0, maximum: 100)
        let (nothing, _) = machine.pull(connection: 0, released: 1, maximum: 100)
        #expect(nothing.isEmpty)
        #expect(machine.submit(requests(1..<2)).wake == [0], "a parked connection is woken")
        #expect(machine.submit(requests(2..<3)).wake.isEmpty, "already woken: no second wake-up")
    }

    @Test func whenEveryConnectionIsFullAnotherIsOpenedUpToTheMaximum() {
        var machine = Machine(configuration: .init(maximumConnections: 2))
        _ = machine.submit(requests(0..<1))
        _ = machine.connectionEstablished(0, availableStreams: 2)
        _ = machine.pull(connection: 0, released: 0, maximum: 2)
        let burst = machine.submit(requests(1..<10))
        #expect(burst.connect == 1)
        _ = machine.connectionEstablished(1, availableStreams: 2)
        _ = machine.pull(connection: 1, released: 0, maximum: 2)
        #expect(machine.submit(requests(10..<20)).connect == nil, "the maximum is two")
        #expect(machine.connectionCount == 2)
    }

    @Test func loweredCapacityIsHonoured() {
        var machine = Machine(configuration: .init(maximumConnections: 1))
        _ = machine.submit(requests(0..<10))
        _ = machine.connectionEstablished(0, availableStreams: 5)
        _ = machine.pull(connection: 0, released: 0, maximum: 5)
        _ = machine.capacityChanged(0, capacity: 1)
        // Four answers come back; one is still out and the limit is one: nothing new.
        let (taken, _) = machine.pull(connection: 0, released: 4, maximum: 0)
        #expect(taken.isEmpty)
        let (next, _) = machine.pull(connection: 0, released: 1, maximum: 1)
        #expect(next.count == 1)
    }

    @Test func requeuedRequestsGoFirst() {
        var machine = Machine(configuration: .init(maximumConnections: 1))
        _ = machine.submit(requests(0..<4))
        _ = machine.connectionEstablished(0, availableStreams: 2)
        let (taken, _) = machine.pull(connection: 0, released: 0, maximum: 2)
        _ = machine.requeue(taken)
        let (again, _) = machine.pull(connection: 0, released: 2, maximum: 2)
        #expect(again.map(\.poolRequestID) == [0, 1])
    }

    @Test func goAwayRetiresAConnectionAndOpensAnotherForTheQueue() {
        var machine = Machine(configuration: .init(maximumConnections: 1))
        _ = machine.submit(requests(0..<4))
        _ = machine.connectionEstablished(0, availableStreams: 2)
        _ = machine.pull(connection: 0, released: 0, maximum: 2)
        // At the maximum already: the replacement is opened once the retiring one is gone.
        #expect(machine.connectionRetiring(0).connect == nil)
        #expect(
            machine.pull(connection: 0, released: 1, maximum: 1).requests.isEmpty,
            "a retiring connection gets no work"
        )
        #expect(machine.connectionClosed(0).connect == 1)
    }

    @Test func failedConnectsBackOffExponentiallyWithJitterWithinTheCap() {
        var machine = Machine(
            configuration: .init(
                maximumConnections: 1,
                reconnectBaseDelay: .milliseconds(100),
                reconnectMaximumDelay: .seconds(2)
            )
        )
        #expect(machine.submit(requests(0..<1)).connect == 0)
        var id = 0
        var ceilings: [TimeAmount] = []
        for failure in 1...8 {
            let actions = machine.connectionFailed(id, error: "refused")
            guard let (next, delay) = actions.connectAfter else {
                Issue.record("no reconnect scheduled after failure \(failure)")
                return
            }
            let ceiling = min(TimeAmount.seconds(2), .milliseconds(100 * (1 << (failure - 1))))
            ceilings.append(ceiling)
            #expect(delay >= .zero && delay <= ceiling, "failure \(failure): \(delay) not within [0, \(ceiling)]")
            #expect(machine.reconnectDelayElapsed(next).connect == next)
            id = next
        }
        #expect(ceilings.last == .seconds(2))
        // A success resets the back-off: the next failure waits at most the base delay again.
        _ = machine.connectionEstablished(id, availableStreams: 10)
        _ = machine.pull(connection: id, released: 0, maximum: 10)
        _ = machine.connectionClosed(id)
    }

    @Test func noReconnectIsScheduledWhenNothingIsQueued() {
        var machine = Machine(configuration: .init(maximumConnections: 1))
        _ = machine.submit(requests(0..<1))
        _ = machine.cancelQueued(requestID: 0)
        #expect(machine.connectionFailed(0, error: "refused").isEmpty)
    }

    @Test func tickFailsRequestsPastTheirDeadline() {
        var machine = Machine(configuration: .init(maximumConnections: 1))
        _ = machine.submit(requests(0..<2, deadline: now + .seconds(1)) + requests(2..<3, deadline: now + .seconds(10)))
        let actions = machine.tick(now: now + .seconds(2))
        #expect(actions.fail.map(\.0.poolRequestID) == [0, 1])
        #expect(actions.fail.allSatisfy { $0.1 == .deadlineExceeded })
        #expect(machine.queuedCount == 1)
    }

    @Test func deadlineFailuresAfterConnectFailuresSayWhy() {
        var machine = Machine(configuration: .init(maximumConnections: 1))
        _ = machine.submit(requests(0..<1, deadline: now + .seconds(1)))
        _ = machine.connectionFailed(0, error: "TLS: certificate verify failed")
        let actions = machine.tick(now: now + .seconds(2))
        #expect(actions.fail.first?.1 == .connectFailed("TLS: certificate verify failed"))
    }

    @Test func cancellingAQueuedRequestRemovesIt() {
        var machine = Machine(configuration: .init(maximumConnections: 1))
        _ = machine.submit(requests(0..<3))
        #expect(machine.cancelQueued(requestID: 1)?.poolRequestID == 1)
        #expect(machine.cancelQueued(requestID: 1) == nil)
        #expect(machine.queuedCount == 2)
    }

    @Test func shutdownFailsTheQueueRetiresConnectionsAndRefusesNewWork() {
        var machine = Machine(configuration: .init(maximumConnections: 2))
        _ = machine.submit(requests(0..<3))
        _ = machine.connectionEstablished(0, availableStreams: 1)
        _ = machine.pull(connection: 0, released: 0, maximum: 1)
        let actions = machine.shutdown()
        #expect(actions.fail.map(\.0.poolRequestID).sorted() == [1, 2])
        #expect(actions.close.sorted() == [0, 1], "the busy one and the one opened for the backlog")
        let late = machine.submit(requests(9..<10))
        #expect(late.fail.first?.1 == .shutdown)
    }
}

@Suite("Connection pool: withdrawing unsent work")
struct ConnectionPoolWithdrawTests {
    let now = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test func onlyRequestsStillQueuedAreWithdrawn() {
        var machine = ConnectionPoolStateMachine<TestRequest>(configuration: .init(maximumConnections: 1))
        _ = machine.submit((0..<6).map { TestRequest(poolRequestID: $0, deadline: now + .seconds(30)) })
        _ = machine.connectionEstablished(0, availableStreams: 2)
        let (onTheWire, _) = machine.pull(connection: 0, released: 0, maximum: 2)
        #expect(onTheWire.map(\.poolRequestID) == [0, 1])
        let withdrawn = machine.withdrawQueued(requestIDs: [0, 1, 2, 4, 99])
        #expect(withdrawn.map(\.poolRequestID) == [2, 4], "0 and 1 are on a connection; 99 is unknown")
        #expect(machine.queuedCount == 2)
        let (next, _) = machine.pull(connection: 0, released: 2, maximum: 2)
        #expect(next.map(\.poolRequestID) == [3, 5])
    }
}
