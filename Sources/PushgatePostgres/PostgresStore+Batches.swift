import Logging
import PostgresNIO
public import PushgateCore

/// Group commit: many requests, or the progress of many chunks, in one transaction.
extension PostgresStore {
    /// One REPEATABLE READ transaction: the groups and the device bound read once for the batch
    /// (``targetLookups(for:on:)``), then each request as ``enqueue(_:)`` stores it. A refusal
    /// (``StoreError/refusesOnlyItsRequest``) writes nothing of its request and is its answer: a request
    /// without an idempotency key is refused before its first write (``store(_:groups:tokens:lookups:on:)``),
    /// and one with a key is stored in a savepoint of its own (clearing an expired key is a write that a
    /// later refusal must take back). Any other error fails the transaction, and so the batch (a
    /// serialization failure runs the whole batch again, as it does a single request).
    ///
    /// With `claiming`, the claim follows in a READ COMMITTED transaction of its own (``claimChunks(_:)``'s,
    /// the scheduler's choice; PostgreSQL's claim locks rows that other instances write, which a REPEATABLE
    /// READ transaction would answer with serialization failures), and the batch's `NOTIFY` is sent only
    /// if a request stored here is left with uncut targets: other instances are woken for work, not for
    /// chunks this instance took already. A claim that fails costs the batch nothing: its requests are
    /// stored, and the `NOTIFY` is sent on its own.
    public func enqueue(
        batch requests: [NotificationRequest],
        claiming: BatchClaim?
    ) async throws
        -> EnqueueBatchResult
    {
        var results = [Result<EnqueueResult, StoreError>?](repeating: nil, count: requests.count)
        var checked: [(index: Int, groups: [String], tokens: [DeviceToken])] = []
        for (index, request) in requests.enumerated() {
            do throws(StoreError) {
                let (groups, tokens) = try Self.checkedTargets(request)
                checked.append((index, groups, tokens))
            } catch {
                results[index] = .failure(error)
            }
        }
        var pending = [RequestID]()
        if !checked.isEmpty {
            let batch = checked
            let notifies = claiming == nil
            let stored = try await transaction(isolation: "REPEATABLE READ") { connection in
                let lookups = try await targetLookups(
                    for: batch.map { (requests[$0.index].app, $0.groups) },
                    on: connection
                )
                var answers: [(index: Int, answer: Result<EnqueueResult, StoreError>)] = []
                var pending = [RequestID]()
                for item in batch {
                    let request = requests[item.index]
                    let keyed = request.idempotency != nil
                    if keyed { try await connection.run("SAVEPOINT batch_request", logger: logger) }
                    do {
                        let stored = try await store(
                            request,
                            groups: item.groups,
                            tokens: item.tokens,
                            lookups: lookups,
                            on: connection
                        )
                        if keyed { try await connection.run("RELEASE SAVEPOINT batch_request", logger: logger) }
                        if stored.pending { pending.append(stored.result.id) }
                        answers.append((item.index, .success(stored.result)))
                    } catch let error as StoreError where error.refusesOnlyItsRequest {
                        if keyed {
                            try await connection.run("ROLLBACK TO SAVEPOINT batch_request", logger: logger)
                        }
                        answers.append((item.index, .failure(error)))
                    }
                }
                if notifies && !pending.isEmpty { try await notifyWork(on: connection) }
                return (answers: answers, pending: pending)
            }
            for (index, answer) in stored.answers { results[index] = answer }
            pending = stored.pending
        }
        guard var claim = claiming, !pending.isEmpty else { return EnqueueBatchResult(results: results.map { $0! }) }
        claim.maximumChunks = min(claim.maximumChunks, pending.count)
        let claimed: [ClaimedWork]
        do {
            claimed = try await claimChunks(claim, notifyingUnlessCut: Set(pending))
        } catch {
            logger.debug(
                "claim with a group commit failed; other instances are told of its requests",
                metadata: ["store.error": "\(Self.storeError(error).message)"]
            )
            _ = try? await read { connection in try await notifyWork(on: connection) }
            claimed = []
        }
        return EnqueueBatchResult(results: results.map { $0! }, claimed: claimed)
    }

    /// One transaction, the chunks in id order (their requests' lock order, mostly: fewer deadlocks with
    /// another instance's batch; one is run again like any transaction's).
    public func recordProgress(batch records: [ProgressRecord]) async -> [Result<ProgressResult, StoreError>] {
        if records.isEmpty { return [] }
        let order = records.indices.sorted { records[$0].progress.chunk.id < records[$1].progress.chunk.id }
        do {
            let answers = try await transaction { connection in
                var answers = [ProgressResult](repeating: .leaseLost, count: records.count)
                for index in order {
                    answers[index] = try await recordProgress(
                        records[index].progress,
                        renewing: records[index].lease,
                        on: connection
                    )
                }
                return answers
            }
            return answers.map { .success($0) }
        } catch {
            return Array(repeating: .failure(Self.storeError(error)), count: records.count)
        }
    }
}
