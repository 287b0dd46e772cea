import Testing

@testable import PushgateUDP

@Suite("Ingress queue state machine")
struct IngressQueueStateMachineTests {
    /// Waiters and readers are plain strings in these transcripts.
    typealias Machine = IngressQueueStateMachine<Int, String, String>

    @Test("a waiting consumer gets what one read cycle parsed, as one batch")
    func groupCommit() {
        var machine = Machine(capacity: 100, batchLimit: 10)
        guard case .suspended = machine.nextBatch(waiter: "consumer") else {
            Issue.record("expected the consumer to wait")
            return
        }
        machine.received(1)
        machine.received(2)
        machine.received(3)
        guard case .resumeConsumer(let waiter, let batch) = machine.readCycleCompleted() else {
            Issue.record("expected the consumer to be resumed")
            return
        }
        #expect(waiter == "consumer")
        #expect(batch == [1, 2, 3])
        guard case .none = machine.readCycleCompleted() else {
            Issue.record("nothing to hand out")
            return
        }
    }

    @Test("while a batch is written the next accumulates, cut at the batch limit")
    func batchLimit() {
        var machine = Machine(capacity: 100, batchLimit: 3)
        for value in 1...7 { machine.received(value) }
        #expect(machine.readCycleCompleted().isNone)  // nobody waits: the consumer is busy
        #expect(machine.nextBatch(waiter: "c").batch == [1, 2, 3])
        #expect(machine.nextBatch(waiter: "c").batch == [4, 5, 6])
        #expect(machine.nextBatch(waiter: "c").batch == [7])
        #expect(machine.nextBatch(waiter: "c").isSuspended)
    }

    @Test("while the store fails every read is held, below capacity too, until it recovers")
    func storeFailureHoldsReads() {
        var machine = Machine(capacity: 4, batchLimit: 3)
        machine.received(1)
        #expect(machine.nextBatch(waiter: "c").batch == [1])
        machine.storeFailed()
        #expect(machine.readRequested("socket A") == .hold)
        machine.received(2)
        #expect(machine.nextBatch(waiter: "c").batch == [2], "what was read still goes to the consumer")
        #expect(machine.readRequested("socket B") == .hold)
        #expect(machine.storeRecovered() == ["socket A", "socket B"])
        #expect(machine.readRequested("socket A") == .read)
        #expect(machine.storeRecovered().isEmpty, "nothing is held any more")
    }

    @Test("reads are held at capacity and resumed once a batch is taken")
    func backPressure() {
        var machine = Machine(capacity: 4, batchLimit: 3)
        for value in 1...3 { machine.received(value) }
        #expect(machine.readRequested("socket A") == .read)
        machine.received(4)
        #expect(machine.readRequested("socket A") == .hold)
        #expect(machine.readRequested("socket B") == .hold)
        guard case .batch(let batch, let readers) = machine.nextBatch(waiter: "c") else {
            Issue.record("expected a batch")
            return
        }
        #expect(batch == [1, 2, 3])
        #expect(readers == ["socket A", "socket B"])
        #expect(machine.readRequested("socket A") == .read)
    }

    @Test("held readers stay held while the queue is still at capacity after a batch")
    func stillFull() {
        var machine = Machine(capacity: 2, batchLimit: 1)
        for value in 1...4 { machine.received(value) }
        #expect(machine.readRequested("socket") == .hold)
        #expect(machine.nextBatch(waiter: "c").readers == [])  // 3 left, capacity 2
        #expect(machine.nextBatch(waiter: "c").readers == [])  // 2 left: still at capacity
        #expect(machine.nextBatch(waiter: "c").readers == ["socket"])  // 1 left: room
    }

    @Test("finish drains what is pending, then ends; a waiting consumer is told at once")
    func finish() {
        var machine = Machine(capacity: 10, batchLimit: 10)
        machine.received(1)
        let (action, readers) = machine.finish()
        #expect(readers.isEmpty)
        guard case .none = action else {
            Issue.record("nobody waits")
            return
        }
        #expect(machine.nextBatch(waiter: "c").batch == [1])
        #expect(machine.nextBatch(waiter: "c").isFinished)
        machine.received(2)  // late datagrams after finish are dropped
        #expect(machine.nextBatch(waiter: "c").isFinished)

        var idle = Machine(capacity: 10, batchLimit: 10)
        #expect(idle.nextBatch(waiter: "c").isSuspended)
        guard case (.resumeConsumerFinished("c"), _) = idle.finish() else {
            Issue.record("the waiting consumer must be resumed")
            return
        }
    }

    @Test("finish releases held readers")
    func finishReleasesReaders() {
        var machine = Machine(capacity: 1, batchLimit: 1)
        machine.received(1)
        #expect(machine.readRequested("socket") == .hold)
        #expect(machine.finish().heldReaders == ["socket"])
        #expect(machine.readRequested("socket") == .read)
    }

    @Test("with the default limits, a writer that falls behind gets batches of 50,000 and reads go on to 60,000")
    func defaultRegistrationLimits() {
        let defaults = UDPIngress.Configuration()
        var machine = Machine(capacity: defaults.pendingRegistrationLimit, batchLimit: defaults.registrationBatchLimit)
        for value in 0..<59_999 { machine.received(value) }
        #expect(machine.readRequested("socket") == .read)
        machine.received(59_999)
        #expect(machine.readRequested("socket") == .hold)
        let taken = machine.nextBatch(waiter: "writer")
        #expect(taken.batch?.count == 50_000)
        #expect(taken.batch?.first == 0)
        #expect(taken.readers == ["socket"])  // 10,000 left: reading resumes while the batch is written
        #expect(machine.pendingCount == 10_000)
    }
}

extension IngressQueueStateMachine.NextBatchAction {
    var batch: [Element]? {
        if case .batch(let batch, _) = self { return batch }
        return nil
    }
    var readers: [Reader]? {
        if case .batch(_, let readers) = self { return readers }
        return nil
    }
    var isSuspended: Bool {
        if case .suspended = self { return true }
        return false
    }
    var isFinished: Bool {
        if case .finished = self { return true }
        return false
    }
}

extension IngressQueueStateMachine.ReadCycleAction {
    var isNone: Bool {
        if case .none = self { return true }
        return false
    }
}
