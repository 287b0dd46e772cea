public import Foundation

/// What a store provides for retention: three SQL primitives, each one short statement or transaction.
/// Which requests go, in which batches and in which order is decided once, by ``LedgerRetention`` (run
/// by ``LedgerPruner``), for every store.
///
/// Only finished requests (`done` or `expired`) are ever deleted: both delete primitives leave alone a
/// request that is not finished, whatever they are given.
public protocol LedgerPruning: Sendable {
    /// Up to `limit` requests after sequence number `seq`, in sequence (storage) order: a read, no lock.
    func retentionScan(after seq: Int64, limit: Int) async throws -> [RetentionCandidate]

    /// Deletes at most `limit` rows kept per device or per direct token (failures, direct tokens,
    /// leftover retries and removed targets) of these finished requests, in one transaction, and answers
    /// how many it deleted. The requests' reports do not read these rows (their counts live elsewhere),
    /// so a report stays whole while a large request is deleted in several transactions.
    func deleteRetainedDetails(of requests: [Int64], limit: Int) async throws -> Int

    /// Deletes these finished requests with everything else that is theirs (chunks, groups, unknown
    /// groups, failure counts, the idempotency key on the row), in one transaction. From its commit on the
    /// requests are unknown: their reports answer nil.
    func deleteRetainedRequests(_ requests: [Int64]) async throws -> PrunedRows
}

/// One request as a retention pass sees it.
public struct RetentionCandidate: Hashable, Sendable {
    /// The store's sequence number (storage and FIFO order).
    public var seq: Int64
    public var createdAt: Date
    /// When it finished (`done` or `expired`); nil while it is not finished.
    public var finishedAt: Date?

    public init(seq: Int64, createdAt: Date, finishedAt: Date?) {
        self.seq = seq
        self.createdAt = createdAt
        self.finishedAt = finishedAt
    }
}

/// What ``LedgerPruning/deleteRetainedRequests(_:)`` deleted.
public struct PrunedRows: Hashable, Sendable {
    public var requests: Int
    /// Every row, the request rows included.
    public var rows: Int

    public init(requests: Int, rows: Int) {
        self.requests = requests
        self.rows = rows
    }
}
