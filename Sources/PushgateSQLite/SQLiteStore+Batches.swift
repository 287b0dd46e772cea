import GRDB
public import PushgateCore

/// Group commit: many requests, or the progress of many chunks, in one write transaction and one fsync.
extension SQLiteStore {
    /// Each request in a savepoint of its own: a refusal (``StoreError/refusesOnlyItsRequest``) rolls
    /// back only that request and is its answer; any other error fails the transaction, and so the batch.
    /// A request with more targets than ``plannedInWriterLimit`` is not counted inside the write lock: it
    /// is stored afterwards as by ``enqueue(_:)`` (a read snapshot, then its own write).
    public func enqueue(
        batch requests: [NotificationRequest],
        claiming: BatchClaim?
    ) async throws
        -> EnqueueBatchResult
    {
        if let claiming {
            _ = try StoreError.positive(claiming.chunkSize, "chunk size")
            _ = try StoreError.positive(claiming.pageLimit)
        }
        var results = [Result<EnqueueResult, StoreError>?](repeating: nil, count: requests.count)
        var checked: [(index: Int, groups: [String], tokens: [DeviceToken])] = []
        for (index, request) in requests.enumerated() {
            do {
                let (groups, tokens) = try Self.checkedTargets(request)
                checked.append((index, groups, tokens))
            } catch let error as StoreError {
                results[index] = .failure(error)
            }
        }
        let batch = checked
        let written = try await write { db in
            var answers: [(index: Int, answer: Result<EnqueueResult, StoreError>)] = []
            var large: [Int] = []
            var newWork = 0
            for item in batch {
                let request = requests[item.index]
                var answer: EnqueueResult?
                do {
                    try db.inSavepoint {
                        if let earlier = try Self.earlierRequest(answering: request, in: db) {
                            answer = earlier
                            return .commit
                        }
                        guard
                            try Self.targetsAtMost(
                                Self.plannedInWriterLimit,
                                app: request.app,
                                groups: item.groups,
                                tokens: item.tokens,
                                in: db
                            )
                        else { return .commit }
                        let plan = try Self.planTargets(
                            app: request.app,
                            groups: item.groups,
                            tokens: item.tokens,
                            in: db
                        )
                        answer = try Self.insert(request, plan, in: db)
                        return .commit
                    }
                } catch let error as StoreError where error.refusesOnlyItsRequest {
                    answers.append((item.index, .failure(error)))
                    continue
                }
                guard let answer else {
                    large.append(item.index)
                    continue
                }
                if !answer.isReplay && answer.targetCount > 0 { newWork += 1 }
                answers.append((item.index, .success(answer)))
            }
            // As many claims as the batch brought work, each the scheduler's choice: a claim cuts the most
            // deserving chunk, which is not necessarily one of this batch's.
            var claimed: [ClaimedWork] = []
            if var claim = claiming, min(newWork, claim.maximumChunks) > 0 {
                claim.maximumChunks = min(newWork, claim.maximumChunks)
                claimed = try Self.claimChunks(claim, in: db)
            }
            return (answers: answers, large: large, claimed: claimed)
        }
        for (index, answer) in written.answers { results[index] = answer }
        // After the batch's commit, each in transactions of its own: a failure here is only its own.
        for index in written.large {
            do {
                results[index] = .success(try await enqueue(requests[index]))
            } catch let error as StoreError {
                results[index] = .failure(error)
            } catch {
                results[index] = .failure(StoreError.backend("\(error)"))
            }
        }
        return EnqueueBatchResult(results: results.map { $0! }, claimed: written.claimed)
    }

    public func recordProgress(batch records: [ProgressRecord]) async -> [Result<ProgressResult, StoreError>] {
        if records.isEmpty { return [] }
        do {
            let results = try await write { db in
                try records.map { try Self.recordProgress($0.progress, renewing: $0.lease, in: db) }
            }
            return results.map { .success($0) }
        } catch let error as StoreError {
            return Array(repeating: .failure(error), count: records.count)
        } catch {
            return Array(repeating: .failure(StoreError.backend("\(error)")), count: records.count)
        }
    }
}
