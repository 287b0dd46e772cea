import GRDB
public import PushgateCore

/// Group commit: many requests and the progress of many chunks, in one write transaction and one fsync.
extension SQLiteStore {
    /// A refusal (``StoreError/refusesOnlyItsRequest``) changes nothing of its request and is its answer:
    /// every refusal of a request without an idempotency key comes before its first write, and one with a
    /// key is stored in a savepoint of its own; any other error fails the transaction, and so the batch.
    /// A request with more targets than ``plannedInWriterLimit`` is not counted inside the write lock: it
    /// is stored afterwards as by ``enqueue(_:)`` (a read snapshot, then its own write).
    public func enqueue(
        batch requests: [NotificationRequest],
        claiming: BatchClaim?
    ) async throws
        -> EnqueueBatchResult
    {
        try await write(LedgerWrite(requests: requests, claiming: claiming)).enqueued.get()
    }

    /// The records and the requests in one transaction (the records first): one fsync for both.
    public func write(_ batch: LedgerWrite) async -> LedgerWriteResult {
        let (requests, records) = (batch.requests, batch.records)
        if requests.isEmpty && records.isEmpty {
            return LedgerWriteResult(enqueued: .success(EnqueueBatchResult(results: [])), recorded: [])
        }
        var claiming = batch.claiming
        var refusal: StoreError?
        if let claim = claiming {
            do {
                _ = try StoreError.positive(claim.chunkSize, "chunk size")
                _ = try StoreError.positive(claim.pageLimit)
            } catch {
                refusal = error
                claiming = nil
            }
        }
        var results = [Result<EnqueueResult, StoreError>?](repeating: nil, count: requests.count)
        var checked: [(index: Int, groups: [String], tokens: [DeviceToken])] = []
        if refusal == nil {
            for (index, request) in requests.enumerated() {
                do {
                    let (groups, tokens) = try Self.checkedTargets(request)
                    checked.append((index, groups, tokens))
                } catch let error as StoreError {
                    results[index] = .failure(error)
                } catch {
                    results[index] = .failure(StoreError.backend("\(error)"))
                }
            }
        }
        let toStore = checked
        let claim = claiming
        if toStore.isEmpty && records.isEmpty {
            return LedgerWriteResult(
                enqueued: refusal.map { .failure($0) } ?? .success(EnqueueBatchResult(results: results.map { $0! })),
                recorded: []
            )
        }
        let written: (recorded: [ProgressResult], stored: StoredBatch)
        do {
            written = try await write { db in
                let recorded = records.isEmpty ? [] : try Self.recordProgress(batch: records, in: db)
                return (recorded, try Self.store(toStore, of: requests, claiming: claim, in: db))
            }
        } catch {
            return LedgerWriteResult(failing: batch, with: (error as? StoreError) ?? StoreError.backend("\(error)"))
        }
        let recorded = written.recorded.map { Result<ProgressResult, StoreError>.success($0) }
        if let refusal { return LedgerWriteResult(enqueued: .failure(refusal), recorded: recorded) }
        for (index, answer) in written.stored.answers { results[index] = answer }
        // After the batch's commit, each in transactions of its own: a failure here is only its own.
        for index in written.stored.large {
            do {
                results[index] = .success(try await enqueue(requests[index]))
            } catch let error as StoreError {
                results[index] = .failure(error)
            } catch {
                results[index] = .failure(StoreError.backend("\(error)"))
            }
        }
        return LedgerWriteResult(
            enqueued: .success(EnqueueBatchResult(results: results.map { $0! }, claimed: written.stored.claimed)),
            recorded: recorded
        )
    }

    /// What ``store(_:of:claiming:in:)`` wrote: answers by the request's index in the batch, the requests
    /// left for their own transactions, and the chunks claimed.
    private struct StoredBatch: Sendable {
        var answers: [(index: Int, answer: Result<EnqueueResult, StoreError>)] = []
        var large: [Int] = []
        var claimed: [ClaimedWork] = []
    }

    /// The requests of a batch that passed their checks, in the caller's write transaction, and the claim
    /// made with them. Requests with more targets than ``plannedInWriterLimit`` come back as `large`, for
    /// the caller to store after the commit.
    private static func store(
        _ batch: [(index: Int, groups: [String], tokens: [DeviceToken])],
        of requests: [NotificationRequest],
        claiming: BatchClaim?,
        in db: Database
    ) throws -> StoredBatch {
        if batch.isEmpty { return StoredBatch() }
        var answers: [(index: Int, answer: Result<EnqueueResult, StoreError>)] = []
        var large: [Int] = []
        var newWork = 0
        var lookups = TargetLookups()
        try lookups.read(batch: batch.map { (requests[$0.index].app, $0.groups) }, in: db)
        // The request_group rows this transaction writes, by request seq: the claim below cuts from them.
        var knownGroups = [Int64: [Int64]]()
        // Their memberships, for those of one group that the lookups counted: the claim's first cut.
        var knownMemberships = [Int64: Int]()
        for item in batch {
            let request = requests[item.index]
            var answer: EnqueueResult?
            let store = { () throws -> Bool in
                if let earlier = try Self.earlierRequest(answering: request, in: db) {
                    answer = earlier
                    return true
                }
                guard
                    try Self.targetsAtMost(
                        Self.plannedInWriterLimit,
                        app: request.app,
                        groups: item.groups,
                        tokens: item.tokens,
                        lookups: &lookups,
                        in: db
                    )
                else { return true }
                let plan = try Self.planTargets(
                    app: request.app,
                    groups: item.groups,
                    tokens: item.tokens,
                    lookups: &lookups,
                    in: db
                )
                let inserted = try Self.insertRequest(request, plan, groupRows: false, in: db)
                answer = inserted.stored
                knownGroups[inserted.seq] = plan.groupIDs
                // (Counted up to the limit + 1: exact only within it.)
                if plan.groupIDs.count == 1, let count = lookups.membershipCount(of: plan.groupIDs[0]),
                    count <= Self.plannedInWriterLimit
                {
                    knownMemberships[inserted.seq] = count
                }
                return true
            }
            do {
                if request.idempotency == nil {
                    // Every refusal comes before the request's first write (the row's insert, refused
                    // alone by SQLite on a duplicate id): nothing to roll back, so no savepoint.
                    _ = try store()
                } else {
                    // Releasing an expired key is a write that a later refusal must take back.
                    try db.inSavepoint {
                        _ = try store()
                        return .commit
                    }
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
        try Self.insertRequestGroups(knownGroups, in: db)
        // As many claims as the batch brought work, each the scheduler's choice: a claim cuts the most
        // deserving chunk, which is not necessarily one of this batch's.
        var claimed: [ClaimedWork] = []
        if var claim = claiming, min(newWork, claim.maximumChunks) > 0 {
            claim.maximumChunks = min(newWork, claim.maximumChunks)
            claimed = try Self.claimChunks(
                claim,
                knownGroups: knownGroups,
                knownMemberships: knownMemberships,
                in: db
            )
        }
        return StoredBatch(answers: answers, large: large, claimed: claimed)
    }

    /// The request_group rows of a batch's new requests (`groupIDs` by request seq), in one statement.
    private static func insertRequestGroups(_ groupIDs: [Int64: [Int64]], in db: Database) throws {
        var rows = [String]()
        for (seq, ids) in groupIDs {
            for id in ids { rows.append("[\(seq),\(id)]") }
        }
        if rows.isEmpty { return }
        try db.cachedStatement(
            sql: """
                INSERT INTO request_group (request_seq, group_id) SELECT value ->> 0, value ->> 1 FROM json_each(?)
                """
        ).execute(arguments: ["[" + rows.joined(separator: ",") + "]"])
    }

    public func recordProgress(batch records: [ProgressRecord]) async -> [Result<ProgressResult, StoreError>] {
        await write(LedgerWrite(records: records)).recorded
    }
}
