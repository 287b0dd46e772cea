import Logging
import PostgresNIO
public import PushgateCore

/// Group commit: many requests, or the progress of many chunks, in one transaction.
extension PostgresStore {
    /// One REPEATABLE READ transaction, each request in a savepoint of its own: a refusal
    /// (``StoreError/refusesOnlyItsRequest``) rolls back only that request and is its answer; any other
    /// error fails the transaction, and so the batch (a serialization failure runs the whole batch again,
    /// as it does a single request). Claims nothing: this store claims the usual way.
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
        if !checked.isEmpty {
            let batch = checked
            let answers = try await transaction(isolation: "REPEATABLE READ") { connection in
                var answers: [(index: Int, answer: Result<EnqueueResult, StoreError>)] = []
                for item in batch {
                    try await connection.run("SAVEPOINT batch_request", logger: logger)
                    do {
                        let stored = try await store(
                            requests[item.index],
                            groups: item.groups,
                            tokens: item.tokens,
                            on: connection
                        )
                        try await connection.run("RELEASE SAVEPOINT batch_request", logger: logger)
                        answers.append((item.index, .success(stored)))
                    } catch let error as StoreError where error.refusesOnlyItsRequest {
                        try await connection.run("ROLLBACK TO SAVEPOINT batch_request", logger: logger)
                        answers.append((item.index, .failure(error)))
                    }
                }
                return answers
            }
            for (index, answer) in answers { results[index] = answer }
        }
        return EnqueueBatchResult(results: results.map { $0! })
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
