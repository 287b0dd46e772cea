/// The hand-over between the event loop that reads datagrams and the task that applies them to the
/// store, with group commit and back-pressure. Pure: no locks, no continuations of its own (the waiter
/// and the reader wake-ups are opaque values the owner stores here and acts on).
///
/// - Datagrams parsed during one read cycle are appended; at the end of the cycle
///   (``readCycleCompleted()``) a waiting consumer is handed everything pending, up to the batch limit.
///   While the consumer writes a batch, the next one accumulates: the batch size follows the store's
///   latency (group commit).
/// - When `capacity` elements are pending, the next socket read is held (``readRequested(_:)`` answers
///   `.hold`), so datagrams queue in the kernel's receive buffer instead of in memory; the held readers
///   are handed back to be resumed as soon as a batch is taken and the queue is below capacity again.
/// - While the store fails (``storeFailed()`` until ``storeRecovered()``), every read is held, whatever
///   the queue holds: what was read waits for the store, and the rest waits in the kernel.
/// - During a store outage declared with ``outageBegan(limit:)`` (registrations), reads go on instead:
///   what arrives waits here, up to `limit` elements, to be applied when the store is back; beyond it a
///   datagram is dropped and the caller counts it (``received(_:)`` answers false). Reading on is what
///   makes the overflow countable: datagrams the kernel drops from a full buffer are counted nowhere.
/// - ``finish()`` ends intake: the consumer still gets what is pending, then `nil`.
struct IngressQueueStateMachine<Element, Waiter, Reader> {
    let capacity: Int
    let batchLimit: Int

    private var pending: [Element] = []
    private var waiter: Waiter?
    private var heldReaders: [Reader] = []
    private var finished = false
    private var storeFailing = false
    /// Set during a declared outage: the most elements kept; reads are never held meanwhile.
    private var outageLimit: Int?

    init(capacity: Int, batchLimit: Int) {
        precondition(capacity > 0 && batchLimit > 0)
        self.capacity = capacity
        self.batchLimit = batchLimit
    }

    var pendingCount: Int { pending.count }

    /// A parsed datagram. It is kept even at capacity: a read cycle is bounded (messages per read), so
    /// the overshoot is too; the next read is what waits.
    /// False when the element was dropped: a declared outage's buffer is full.
    @discardableResult
    mutating func received(_ element: Element) -> Bool {
        guard !finished else { return true }
        if let outageLimit, pending.count >= outageLimit { return false }
        pending.append(element)
        return true
    }

    enum ReadCycleAction {
        case none
        /// Resume the waiting consumer with this batch.
        case resumeConsumer(Waiter, [Element])
    }

    /// The socket has nothing more to read this round.
    mutating func readCycleCompleted() -> ReadCycleAction {
        guard let waiter, !pending.isEmpty else { return .none }
        self.waiter = nil
        return .resumeConsumer(waiter, takeBatch())
    }

    enum ReadAction: Equatable {
        /// Read from the socket.
        case read
        /// Do not read now; the reader was stored and comes back from ``nextBatch(waiter:)``.
        case hold
    }

    /// The channel wants to read more datagrams.
    mutating func readRequested(_ reader: Reader) -> ReadAction {
        guard outageLimit == nil, pending.count >= capacity || storeFailing, !finished else { return .read }
        heldReaders.append(reader)
        return .hold
    }

    enum NextBatchAction {
        /// Apply this batch, and resume these readers (empty unless reads were held and there is room now).
        case batch([Element], resumeReaders: [Reader])
        /// Nothing pending: the waiter is stored and will be resumed by a read cycle or ``finish()``.
        case suspended
        /// Intake is finished and nothing is pending.
        case finished
    }

    /// The consumer is ready for the next batch. `waiter` is stored only if the answer is `.suspended`.
    mutating func nextBatch(waiter: Waiter) -> NextBatchAction {
        precondition(self.waiter == nil, "one consumer at a time")
        if !pending.isEmpty {
            let batch = takeBatch()
            return .batch(batch, resumeReaders: releaseReadersIfRoom())
        }
        if finished { return .finished }
        self.waiter = waiter
        return .suspended
    }

    enum FinishAction {
        case none
        /// Resume the waiting consumer with "no more" (nothing is pending when a consumer waits).
        case resumeConsumerFinished(Waiter)
    }

    /// Intake has stopped (the sockets are closed).
    mutating func finish() -> (FinishAction, heldReaders: [Reader]) {
        finished = true
        let readers = heldReaders
        heldReaders = []
        if let waiter {
            self.waiter = nil
            return (.resumeConsumerFinished(waiter), readers)
        }
        return (.none, readers)
    }

    private mutating func takeBatch() -> [Element] {
        if pending.count <= batchLimit {
            defer { pending = [] }
            return pending
        }
        let batch = Array(pending.prefix(batchLimit))
        pending.removeFirst(batchLimit)
        return batch
    }

    /// A store call failed and will be retried: hold every read until ``storeRecovered()``.
    mutating func storeFailed() {
        storeFailing = true
    }

    /// The store answers again: the held readers, to resume if there is room.
    mutating func storeRecovered() -> [Reader] {
        storeFailing = false
        return releaseReadersIfRoom()
    }

    /// The store is out and the consumer waits for it: read on, keep up to `limit` elements, drop the
    /// rest. Returns the held readers, to resume now.
    mutating func outageBegan(limit: Int) -> [Reader] {
        outageLimit = max(limit, 1)
        defer { heldReaders = [] }
        return heldReaders
    }

    /// The store is back: the ordinary back-pressure again (reads held beyond `capacity`).
    mutating func outageEnded() {
        outageLimit = nil
    }

    private mutating func releaseReadersIfRoom() -> [Reader] {
        guard outageLimit == nil || heldReaders.isEmpty else {
            defer { heldReaders = [] }
            return heldReaders
        }
        guard pending.count < capacity, !storeFailing, !heldReaders.isEmpty else { return [] }
        defer { heldReaders = [] }
        return heldReaders
    }
}
