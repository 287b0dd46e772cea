public import Foundation
import Logging
import PostgresNIO
public import PushgateCore

/// Chunks of a request's targets: claimed under a lease, read in pages, progress recorded.
extension PostgresStore {
    // MARK: - Chunks

    public func claimChunk(
        owner: InstanceID,
        now: Date,
        leaseDuration: Duration,
        chunkSize: Int
    ) async throws
        -> WorkChunk?
    {
        guard chunkSize > 0 else { throw StoreError.invalidArgument("chunk size must be positive (got \(chunkSize))") }
        let nowMs = Millis.from(now)
        let leaseUntil = nowMs + leaseDuration.milliseconds
        return try await transaction { connection in
            _ = try await Self.expireOverdue(nowMs: nowMs, on: connection, logger: logger)

            // 1. Take over a chunk whose holder stopped renewing its lease; rows another instance is
            //    writing right now are skipped, not waited for.
            if let row = try await connection.first(
                """
                WITH t AS (
                    SELECT id FROM chunk
                    WHERE state = \(unescaped: Self.sql(ChunkCode.open)) AND lease_expires_at <= \(nowMs)
                    ORDER BY request_seq, id LIMIT 1 FOR UPDATE SKIP LOCKED
                )
                UPDATE chunk c SET owner = \(owner.value), lease_expires_at = \(leaseUntil), generation = c.generation + 1
                FROM t, request r WHERE c.id = t.id AND r.seq = c.request_seq
                RETURNING c.id, r.id, c.kind::BIGINT, c.range_after, c.range_through, c.progress, c.generation
                """,
                as: (Int64, String, Int64, Int64, Int64, Int64, Int64).self,
                logger: logger
            ) {
                return WorkChunk(
                    id: row.0,
                    requestID: try StoredForm.requestID(row.1),
                    kind: StoredForm.chunkKind(row.2),
                    after: row.3,
                    through: row.4,
                    progress: row.5,
                    leaseGeneration: row.6,
                    leaseExpiresAt: Millis.date(leaseUntil),
                    isTakeover: true
                )
            }

            // 2. Cut the next chunk of the oldest request with uncut targets. Instances cutting the same
            //    broadcast take turns on its row lock (a cut takes milliseconds).
            try await Self.preferOrderedIndexScans(on: connection, logger: logger)
            while let candidate = try await connection.first(
                """
                SELECT seq FROM request WHERE state < \(unescaped: Self.sql(Code.done)) AND NOT cut_done
                ORDER BY seq LIMIT 1
                """,
                as: Int64.self,
                logger: logger
            ) {
                guard
                    let row = try await connection.first(
                        """
                        SELECT id, device_bound, group_cut, token_cut, token_count, cut_done, state::BIGINT
                        FROM request WHERE seq = \(candidate) FOR UPDATE
                        """,
                        as: (String, Int64, Int64, Int64, Int64, Bool, Int64).self,
                        logger: logger
                    ),
                    !row.5, row.6 < Code.done.rawValue
                else { continue }  // another instance finished cutting it meanwhile
                let requestID = try StoredForm.requestID(row.0)
                let groupIDs = try await connection.all(
                    "SELECT group_id FROM request_group WHERE request_seq = \(candidate) ORDER BY group_id",
                    as: Int64.self,
                    logger: logger
                )
                let cursor = LedgerArithmetic.CutCursor(
                    tokenCut: row.3,
                    tokenCount: row.4,
                    groupCut: row.2,
                    bound: row.1,
                    hasGroups: !groupIDs.isEmpty
                )
                let kind: WorkChunk.Kind
                let after: Int64
                let through: Int64
                switch LedgerArithmetic.nextCut(cursor, chunkSize: chunkSize) {
                case .tokens(let from, let to, let cutDone):
                    (kind, after, through) = (.directTokens, from, to)
                    try await connection.run(
                        """
                        UPDATE request SET token_cut = \(through), cut_done = \(cutDone),
                            state = GREATEST(state, \(unescaped: Self.sql(Code.sending))) WHERE seq = \(candidate)
                        """,
                        logger: logger
                    )
                case .members(let from, let bound):
                    let cut = try await Self.cutMembers(
                        groupIDs: groupIDs,
                        after: from,
                        through: bound,
                        limit: chunkSize,
                        on: connection,
                        logger: logger
                    )
                    guard
                        let range = LedgerArithmetic.deviceRange(
                            after: from,
                            bound: bound,
                            found: cut.count,
                            lastFound: cut.last,
                            chunkSize: chunkSize
                        )
                    else {
                        try await connection.run(
                            "UPDATE request SET cut_done = TRUE WHERE seq = \(candidate)",
                            logger: logger
                        )
                        try await Self.finishIfDone(requestSeq: candidate, nowMs: nowMs, on: connection, logger: logger)
                        continue
                    }
                    (kind, after, through) = (.deviceRange, range.after, range.through)
                    try await connection.run(
                        """
                        UPDATE request SET group_cut = \(through), cut_done = \(range.cutDone),
                            state = GREATEST(state, \(unescaped: Self.sql(Code.sending))) WHERE seq = \(candidate)
                        """,
                        logger: logger
                    )
                }
                guard
                    let chunkID = try await connection.first(
                        """
                        INSERT INTO chunk (request_seq, kind, range_after, range_through, progress, state, owner, lease_expires_at, generation)
                        VALUES (\(candidate), \(Int16(StoredForm.ChunkKindCode(kind).rawValue)), \(after), \(through),
                                \(after),
                                \(unescaped: Self.sql(ChunkCode.open)),
                                \(owner.value), \(leaseUntil), 1)
                        RETURNING id
                        """,
                        as: Int64.self,
                        logger: logger
                    )
                else { throw StoreError.backend("inserting a chunk returned no id") }
                return WorkChunk.cut(
                    id: chunkID,
                    of: requestID,
                    kind,
                    after: after,
                    through: through,
                    leaseExpiresAt: Millis.date(leaseUntil)
                )
            }
            return nil
        }
    }

    public func targets(of chunk: WorkChunk, after cursor: Int64, limit: Int) async throws -> TargetPage {
        let scan = try TargetScan(chunk: chunk, after: cursor, limit: limit)
        if scan.isDone { return try scan.page(found: []) }
        return try await transaction { connection in
            try await Self.preferOrderedIndexScans(on: connection, logger: logger)
            guard
                let (requestSeq, app, groupIDs) = try await connection.first(
                    """
                    SELECT c.request_seq, r.app,
                        ARRAY(SELECT group_id FROM request_group WHERE request_seq = c.request_seq ORDER BY group_id)
                    FROM chunk c JOIN request r ON r.seq = c.request_seq WHERE c.id = \(chunk.id)
                    """,
                    as: (Int64, String, [Int64]).self,
                    logger: logger
                )
            else { throw StoreError.invalidArgument("unknown chunk \(chunk.id)") }
            let found =
                switch chunk.kind {
                case .deviceRange:
                    try await Self.deviceTargets(groupIDs: groupIDs, scan, on: connection, logger: logger)
                case .directTokens:
                    try await Self.tokenTargets(requestSeq: requestSeq, app: app, scan, on: connection, logger: logger)
                }
            return try scan.page(found: found)
        }
    }

    /// Locks the request row, then the chunk row (the lock order of every ledger transaction: request,
    /// then its chunks or retries), checks the holder and generation, and writes the batch: counters on
    /// the chunk row, failures and retries with one statement each, invalidations, the progress and the
    /// renewed lease.
    ///
    /// The request lock is shared (`FOR KEY SHARE`: progress of many chunks goes on at once, and it is
    /// what the foreign keys from `failure` and `retry` take anyway) unless the batch completes the chunk:
    /// then `finishIfDone` needs it exclusive, and taking it exclusive from the start avoids two holders
    /// of the shared lock each waiting to upgrade. `expireOverdue` (request `FOR UPDATE`, then chunks)
    /// waits for, or skips, such a transaction instead of deadlocking with it.
    public func recordProgress(
        _ progress: ChunkProgress,
        owner: InstanceID,
        now: Date,
        leaseDuration: Duration
    )
        async throws -> ProgressResult
    {
        let nowMs = Millis.from(now)
        let leaseUntil = nowMs + leaseDuration.milliseconds
        let chunk = progress.chunk
        return try await transaction { connection in
            // `request_seq` of a chunk never changes: read it unlocked, lock the request, then the chunk.
            guard
                let requestSeq = try await connection.first(
                    "SELECT request_seq FROM chunk WHERE id = \(chunk.id)",
                    as: Int64.self,
                    logger: logger
                ),
                try await Self.lockRequest(
                    requestSeq,
                    exclusive: progress.completesChunk,
                    on: connection,
                    logger: logger
                ),
                let row = try await connection.first(
                    """
                    SELECT c.request_seq, c.owner, c.generation, c.state::BIGINT, c.progress, r.app
                    FROM chunk c JOIN request r ON r.seq = c.request_seq WHERE c.id = \(chunk.id) FOR UPDATE OF c
                    """,
                    as: (Int64, String?, Int64, Int64, Int64, String).self,
                    logger: logger
                )
            else { return .leaseLost }
            let (seq, holder, generation, state, recorded, app) = row
            guard holder == owner.value, generation == chunk.leaseGeneration, state == ChunkCode.open.rawValue else {
                return .leaseLost
            }
            let newProgress =
                progress.completesChunk ? chunk.through : max(recorded, min(progress.through, chunk.through))

            try await Self.recordFailures(progress.failures, requestSeq: seq, on: connection, logger: logger)
            if !progress.retries.isEmpty {
                try await Self.scheduleRetries(progress.retries, requestSeq: seq, on: connection, logger: logger)
                try await notifyWork(on: connection)
            }
            for invalidation in progress.invalidations {
                _ = try await Self.invalidate(app: app, invalidation, at: now, on: connection, logger: logger)
            }
            try await connection.run(
                """
                UPDATE chunk SET progress = \(newProgress), lease_expires_at = \(leaseUntil),
                    state = \(Int16((progress.completesChunk ? ChunkCode.done : ChunkCode.open).rawValue)),
                    accepted = accepted + \(Int64(progress.accepted)),
                    last_apns_id = COALESCE(\(progress.lastAPNsID), last_apns_id),
                    last_apns_at = CASE WHEN \(progress.lastAPNsID)::TEXT IS NULL THEN last_apns_at ELSE \(nowMs) END
                WHERE id = \(chunk.id)
                """,
                logger: logger
            )
            if progress.completesChunk {
                try await Self.finishIfDone(requestSeq: seq, nowMs: nowMs, on: connection, logger: logger)
                return .chunkCompleted
            }
            return .recorded(leaseExpiresAt: Millis.date(leaseUntil))
        }
    }
}
