import PushgateCore
import Synchronization

/// Group commit of progress: the records of chunks that fall due in one turn of the loop are written by
/// one background task (``ProgressRecords``), and those of turns that fall due while a store write is
/// under way go together in the next store transaction (``DeliveryLedger/write(_:)``), with the requests
/// submitted meanwhile, each with its own lease check. Many one-device requests finishing at once share one commit and one fsync,
/// and one task and one wake-up instead of one each.
extension Dispatcher {
    /// Records chunks' progress with whatever other records wait, and answers once the transaction that
    /// holds them has ended.
    func recordProgress(batch progress: [ChunkProgress]) async -> [Result<ProgressResult, StoreError>] {
        let lease = LeaseWindow(
            owner: configuration.instanceID,
            now: clock.now(),
            duration: configuration.leaseDuration
        )
        let records = progress.map { LedgerItem.progress(ProgressRecord($0, renewing: lease)) }
        return await ledgerWrites.submit(records) { await self.writeLedger($0) }.map { answer in
            guard case .progress(let result) = answer else { preconditionFailure("a record answered as a request") }
            return result
        }
    }
}

/// The progress records that fell due in one turn of the dispatch loop, for one background write.
struct ProgressRecords {
    private var progress: [ChunkProgress] = []
    private let results = RecordResults()

    /// Adds a chunk's record; its answer comes through the ticket.
    mutating func add(_ record: ChunkProgress) -> RecordTicket {
        progress.append(record)
        return RecordTicket(results: results, index: progress.count - 1)
    }

    /// Writes what was added, in the background; `signal` wakes the loop when the answers are in.
    func start(in group: inout DiscardingTaskGroup, dispatcher: Dispatcher, signal: WakeSignal) {
        guard !progress.isEmpty else { return }
        let (progress, results) = (progress, results)
        group.addTask {
            let answers = await dispatcher.recordProgress(batch: progress)
            results.answers.withLock { $0 = answers }
            signal.signal()
        }
    }
}

/// The answers of one turn's records, once written (nil while the write is under way).
final class RecordResults: Sendable {
    let answers = Mutex<[Result<ProgressResult, StoreError>]?>(nil)
}

/// One chunk's record in a turn's ``ProgressRecords``.
struct RecordTicket: Sendable {
    let results: RecordResults
    let index: Int

    /// The record's answer once written; nil while the write is under way.
    var result: Result<ProgressResult, StoreError>? {
        results.answers.withLock { answers in
            guard let answers, index < answers.count else { return nil }
            return answers[index]
        }
    }
}
