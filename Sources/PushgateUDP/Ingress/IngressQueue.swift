import Synchronization

/// The lock around ``IngressQueueStateMachine``: event loops push parsed datagrams in, one consumer task
/// takes batches out. State changes under the lock; continuations and reader wake-ups run after it.
final class IngressQueue<Element: Sendable>: Sendable {
    /// Wakes a channel whose read was held; called off its event loop (it must hop).
    typealias ReadResumer = @Sendable () -> Void
    private typealias Machine = IngressQueueStateMachine<
        Element, CheckedContinuation<[Element]?, Never>, ReadResumer
    >

    private let machine: Mutex<Machine>

    init(capacity: Int, batchLimit: Int) {
        self.machine = Mutex(Machine(capacity: capacity, batchLimit: batchLimit))
    }

    var pendingCount: Int { machine.withLock { $0.pendingCount } }

    /// From the event loop: one parsed datagram. False: dropped, the outage buffer is full.
    @discardableResult
    func received(_ element: Element) -> Bool {
        machine.withLock { $0.received(element) }
    }

    /// From the consumer: the store is out; read on and keep up to `limit` elements meanwhile.
    func outageBegan(limit: Int) {
        for resume in machine.withLock({ $0.outageBegan(limit: limit) }) { resume() }
    }

    /// From the consumer: the store is back.
    func outageEnded() {
        machine.withLock { $0.outageEnded() }
    }

    /// From the event loop: the read cycle ended; a waiting consumer gets the batch.
    func readCycleCompleted() {
        switch machine.withLock({ $0.readCycleCompleted() }) {
        case .none: break
        case .resumeConsumer(let continuation, let batch): continuation.resume(returning: batch)
        }
    }

    /// From the event loop: may the channel read now? If not, `resume` is called once it may.
    func shouldRead(orResumeWith resume: @escaping ReadResumer) -> Bool {
        machine.withLock { $0.readRequested(resume) } == .read
    }

    /// The consumer's next batch; nil once intake is finished and everything was handed out.
    func nextBatch() async -> [Element]? {
        await withCheckedContinuation { (continuation: CheckedContinuation<[Element]?, Never>) in
            switch machine.withLock({ $0.nextBatch(waiter: continuation) }) {
            case .batch(let batch, let readers):
                continuation.resume(returning: batch)
                for resume in readers { resume() }
            case .suspended:
                break
            case .finished:
                continuation.resume(returning: nil)
            }
        }
    }

    /// From the consumer: a store call failed and will be retried; reads are held until it recovers.
    func storeFailed() {
        machine.withLock { $0.storeFailed() }
    }

    /// From the consumer: the store answers again; held reads resume if there is room.
    func storeRecovered() {
        for resume in machine.withLock({ $0.storeRecovered() }) { resume() }
    }

    /// Intake stopped: the consumer drains what is pending, then gets nil.
    func finish() {
        let (action, readers) = machine.withLock { $0.finish() }
        if case .resumeConsumerFinished(let continuation) = action { continuation.resume(returning: nil) }
        for resume in readers { resume() }
    }
}
