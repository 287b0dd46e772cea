/// The claim an ``DeliveryLedger/enqueue(batch:claiming:)`` makes in the transaction that stores the
/// batch: up to `maximumChunks` chunks, each leased as by ``DeliveryLedger/claimChunk(_:chunkSize:)`` and
/// with its first page read (at most `pageLimit` targets).
public struct BatchClaim: Hashable, Sendable {
    public var lease: LeaseWindow
    public var chunkSize: Int
    public var pageLimit: Int
    public var maximumChunks: Int
    /// Cut only requests never cut before (``ChunkBatchClaim``): a claim made for new work beside as many
    /// of a broadcast's chunks as may be under way, which must not take the broadcast's next chunk.
    public var newRequestsOnly: Bool

    public init(
        lease: LeaseWindow,
        chunkSize: Int,
        pageLimit: Int,
        maximumChunks: Int,
        newRequestsOnly: Bool = false
    ) {
        self.lease = lease
        self.chunkSize = chunkSize
        self.pageLimit = pageLimit
        self.maximumChunks = maximumChunks
        self.newRequestsOnly = newRequestsOnly
    }
}

/// What ``DeliveryLedger/enqueue(batch:claiming:)`` did: one answer per request, in the batch's order
/// (each exactly what ``DeliveryLedger/enqueue(_:)`` alone would have answered or thrown), and the chunks
/// claimed with them.
public struct EnqueueBatchResult: Sendable {
    public var results: [Result<EnqueueResult, StoreError>]
    public var claimed: [ClaimedWork]

    public init(results: [Result<EnqueueResult, StoreError>], claimed: [ClaimedWork] = []) {
        self.results = results
        self.claimed = claimed
    }
}

/// One chunk's progress in a ``DeliveryLedger/recordProgress(batch:)``, with the lease it renews.
public struct ProgressRecord: Hashable, Sendable {
    public var progress: ChunkProgress
    public var lease: LeaseWindow

    public init(_ progress: ChunkProgress, renewing lease: LeaseWindow) {
        self.progress = progress
        self.lease = lease
    }
}

/// What one group commit writes: progress records of chunks under way and new requests (with the claim
/// made with them), for ``DeliveryLedger/write(_:)``.
public struct LedgerWrite: Sendable {
    public var requests: [NotificationRequest]
    public var claiming: BatchClaim?
    public var records: [ProgressRecord]

    public init(requests: [NotificationRequest] = [], claiming: BatchClaim? = nil, records: [ProgressRecord] = []) {
        self.requests = requests
        self.claiming = claiming
        self.records = records
    }
}

/// What ``DeliveryLedger/write(_:)`` did: the answers ``DeliveryLedger/enqueue(batch:claiming:)`` would
/// have given or thrown, and those of ``DeliveryLedger/recordProgress(batch:)``, one per record.
public struct LedgerWriteResult: Sendable {
    public var enqueued: Result<EnqueueBatchResult, StoreError>
    public var recorded: [Result<ProgressResult, StoreError>]

    public init(enqueued: Result<EnqueueBatchResult, StoreError>, recorded: [Result<ProgressResult, StoreError>]) {
        self.enqueued = enqueued
        self.recorded = recorded
    }

    /// Both halves failed with `error` (the transaction that held them).
    public init(failing batch: LedgerWrite, with error: StoreError) {
        self.enqueued = .failure(error)
        self.recorded = Array(repeating: .failure(error), count: batch.records.count)
    }
}

extension StoreError {
    /// A request's own refusal in a batch (it writes nothing, and the others go on) as opposed to a
    /// failure of the store, which fails the batch's transaction.
    package var refusesOnlyItsRequest: Bool {
        [.unknownGroup, .noTargets, .duplicateRequestID, .idempotencyKeyReused, .invalidArgument].contains(code)
    }
}

extension DeliveryLedger {
    /// Stores the requests one transaction each (for stores without a batch of their own): the first one
    /// with the claim of one chunk (``enqueue(_:claiming:chunkSize:pageLimit:)``), the others plainly. A
    /// store failure is that request's answer and the answer of every request after it, which are not
    /// tried (as in one failed transaction, so that a caller trying them again keeps their order); it
    /// never throws.
    public func enqueue(
        batch requests: [NotificationRequest],
        claiming: BatchClaim?
    ) async throws
        -> EnqueueBatchResult
    {
        var outcome = EnqueueBatchResult(results: [])
        outcome.results.reserveCapacity(requests.count)
        var claim = claiming
        for request in requests {
            do {
                if let pending = claim, pending.maximumChunks > 0 {
                    let (stored, claimed) = try await enqueue(
                        request,
                        claiming: pending.lease,
                        chunkSize: pending.chunkSize,
                        pageLimit: pending.pageLimit
                    )
                    if !stored.isReplay { claim = nil }
                    if let claimed { outcome.claimed.append(claimed) }
                    outcome.results.append(.success(stored))
                } else {
                    outcome.results.append(.success(try await enqueue(request)))
                }
            } catch {
                let failure = (error as? StoreError) ?? StoreError.backend("\(error)")
                outcome.results.append(.failure(failure))
                if !failure.refusesOnlyItsRequest {
                    let rest = requests.count - outcome.results.count
                    outcome.results += Array(repeating: .failure(failure), count: rest)
                    break
                }
            }
        }
        return outcome
    }

    /// The two halves one after the other, each in transactions of its own (for stores without a
    /// transaction that holds both): the records first, then the requests.
    public func write(_ batch: LedgerWrite) async -> LedgerWriteResult {
        let recorded = batch.records.isEmpty ? [] : await recordProgress(batch: batch.records)
        let enqueued: Result<EnqueueBatchResult, StoreError>
        if batch.requests.isEmpty {
            enqueued = .success(EnqueueBatchResult(results: []))
        } else {
            do {
                enqueued = .success(try await enqueue(batch: batch.requests, claiming: batch.claiming))
            } catch {
                enqueued = .failure((error as? StoreError) ?? StoreError.backend("\(error)"))
            }
        }
        return LedgerWriteResult(enqueued: enqueued, recorded: recorded)
    }

    /// Records each chunk's progress in a transaction of its own (for stores without a batch of their
    /// own): a failure is that record's answer, the others are written.
    public func recordProgress(batch records: [ProgressRecord]) async -> [Result<ProgressResult, StoreError>] {
        var results: [Result<ProgressResult, StoreError>] = []
        results.reserveCapacity(records.count)
        for record in records {
            do {
                results.append(.success(try await recordProgress(record.progress, renewing: record.lease)))
            } catch let error as StoreError {
                results.append(.failure(error))
            } catch {
                results.append(.failure(StoreError.backend("\(error)")))
            }
        }
        return results
    }
}
