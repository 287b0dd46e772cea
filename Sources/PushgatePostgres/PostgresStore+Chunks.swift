import Foundation
import Logging
import PostgresNIO
public import PushgateCore

/// Chunks of a request's targets: claimed under a lease, read in pages, progress recorded.
extension PostgresStore {
    // MARK: - Chunks

    public func claimChunk(_ lease: LeaseWindow, chunkSize: Int) async throws -> WorkChunk? {
        let chunkSize = try StoreError.positive(chunkSize, "chunk size")
        let (owner, nowMs, leaseUntil) = (lease.owner.value, lease.nowMillis, lease.expiresAtMillis)
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
                UPDATE chunk c SET owner = \(owner), lease_expires_at = \(leaseUntil), generation = c.generation + 1
                FROM t, request r WHERE c.id = t.id AND r.seq = c.request_seq
                RETURNING c.id, r.id, c.kind::BIGINT, c.range_after, c.range_through, c.progress, c.generation
                """,
                as: (Int64, String, Int64, Int64, Int64, Int64, Int64).self,
                logger: logger
            ) {
                return try StoredForm.chunk(takenOver: row, lease)
            }

            // 2. Cut the next chunk of the most deserving request with uncut targets (``ClaimScheduler``:
            //    every instance reads the same turns, so they follow one order). Instances cutting the same
            //    broadcast take turns on its row lock (a cut takes milliseconds).
            try await Self.preferOrderedIndexScans(on: connection, logger: logger)
            while let candidate = try await Self.scheduledRequest(on: connection, logger: logger) {
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
                let stored = (row.1, row.2, row.3, row.4)
                let cursor = LedgerArithmetic.CutCursor(stored: stored, hasGroups: !groupIDs.isEmpty)
                let cut: LedgerArithmetic.Cut
                switch LedgerArithmetic.nextCut(cursor, chunkSize: chunkSize) {
                case .tokens(let tokens): cut = tokens
                case .members(let scan):
                    let found = try await Self.cutMembers(groupIDs: groupIDs, scan, on: connection, logger: logger)
                    guard let members = scan.cut(found: found)
                    else {
                        try await connection.run(
                            "UPDATE request SET cut_done = TRUE WHERE seq = \(candidate)",
                            logger: logger
                        )
                        try await Self.finishIfDone(requestSeq: candidate, nowMs: nowMs, on: connection, logger: logger)
                        continue
                    }
                    cut = members
                }
                try await connection.run(
                    """
                    UPDATE request SET \(unescaped: StoredForm.cutCursorColumn(cut.kind)) = \(cut.through),
                        cut_done = \(cut.cutDone), state = GREATEST(state, \(unescaped: Self.sql(Code.sending)))
                    WHERE seq = \(candidate)
                    """,
                    logger: logger
                )
                guard
                    let chunkID = try await connection.first(
                        """
                        INSERT INTO chunk (request_seq, kind, range_after, range_through, progress, state, owner, lease_expires_at, generation)
                        VALUES (\(candidate), \(Int16(StoredForm.ChunkKindCode(cut.kind).rawValue)), \(cut.after),
                                \(cut.through), \(cut.after),
                                \(unescaped: Self.sql(ChunkCode.open)),
                                \(owner), \(leaseUntil), 1)
                        RETURNING id
                        """,
                        as: Int64.self,
                        logger: logger
                    )
                else { throw StoreError.backend("inserting a chunk returned no id") }
                return WorkChunk.cut(id: chunkID, of: requestID, cut, leaseExpiresAt: lease.expiresAt)
            }
            return nil
        }
    }

    /// The request whose next chunk ``ClaimScheduler`` cuts: the oldest unfinished requests with uncut
    /// targets (through `request_unfinished`), each with its newest chunk (through `chunk_by_request`),
    /// and, only when there is more than one, the newest chunk overall and, when more than one app waits,
    /// the apps of the most recent chunks (a range of `chunk`'s primary key).
    static func scheduledRequest(on connection: PostgresConnection, logger: Logger) async throws -> Int64? {
        let candidates = try await connection.all(
            """
            SELECT r.seq, r.app, r.priority::BIGINT, (SELECT max(c.id) FROM chunk c WHERE c.request_seq = r.seq)
            FROM request r WHERE r.state < \(unescaped: Self.sql(Code.done)) AND NOT r.cut_done
            ORDER BY r.seq LIMIT \(unescaped: String(ClaimScheduler.candidateLimit))
            """,
            as: (Int64, String, Int64, Int64?).self,
            logger: logger
        ).map { ClaimScheduler.Candidate(seq: $0.0, app: $0.1, priority: Int($0.2), lastTurn: $0.3) }
        guard candidates.count > 1 else { return candidates.first?.seq }
        let newest: Int64? = try await connection.first(
            "SELECT coalesce(max(id), 0) FROM chunk",
            as: Int64.self,
            logger: logger
        )
        let latest: Int64 = newest ?? 0
        guard Set(candidates.map(\.app)).count > 1 else {
            // One app: its turn does not matter, only the newest turn (for who is overdue).
            return ClaimScheduler.next(candidates, recentAppTurns: [candidates[0].app: latest])
        }
        let recent = try await connection.all(
            """
            SELECT r.app, max(c.id) FROM chunk c JOIN request r ON r.seq = c.request_seq
            WHERE c.id > \(latest - ClaimScheduler.recentTurnWindow) GROUP BY r.app
            """,
            as: (String, Int64).self,
            logger: logger
        )
        let turns: [String: Int64] = Dictionary(recent.map { ($0.0, $0.1) }, uniquingKeysWith: { max($0, $1) })
        return ClaimScheduler.next(candidates, recentAppTurns: turns)
    }

    public func targets(of chunk: WorkChunk, after cursor: Int64, limit: Int) async throws -> TargetPage {
        let scan = try TargetScan(chunk: chunk, after: cursor, limit: limit)
        if scan.isDone { return try scan.page(found: []) }
        // One snapshot for the page and the removed targets of its range (see `addingRemoved`).
        return try await transaction(isolation: "REPEATABLE READ") { connection in
            try await Self.preferOrderedIndexScans(on: connection, logger: logger)
            guard
                let (requestSeq, app, groupIDs, created) = try await connection.first(
                    """
                    SELECT c.request_seq, r.app,
                        ARRAY(SELECT group_id FROM request_group WHERE request_seq = c.request_seq ORDER BY group_id),
                        r.created_at
                    FROM chunk c JOIN request r ON r.seq = c.request_seq WHERE c.id = \(chunk.id)
                    """,
                    as: (Int64, String, [Int64], Int64).self,
                    logger: logger
                )
            else { throw StoreError.invalidArgument("unknown chunk \(chunk.id)") }
            switch chunk.kind {
            case .deviceRange:
                let page = try scan.page(
                    rows: try await Self.deviceTargets(
                        groupIDs: groupIDs,
                        scan,
                        invalidatedSince: created,
                        on: connection,
                        logger: logger
                    )
                )
                return try await Self.addingRemoved(
                    to: page,
                    requestSeq: requestSeq,
                    after: scan.after,
                    on: connection,
                    logger: logger
                )
            case .directTokens:
                return try scan.page(
                    rows: try await Self.tokenTargets(
                        requestSeq: requestSeq,
                        app: app,
                        scan,
                        invalidatedSince: created,
                        on: connection,
                        logger: logger
                    )
                )
            }
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
    public func recordProgress(_ progress: ChunkProgress, renewing lease: LeaseWindow) async throws -> ProgressResult {
        try await transaction { connection in try await recordProgress(progress, renewing: lease, on: connection) }
    }

    /// ``recordProgress(_:renewing:)`` in a transaction of the caller's.
    func recordProgress(
        _ progress: ChunkProgress,
        renewing lease: LeaseWindow,
        on connection: PostgresConnection
    ) async throws -> ProgressResult {
        let (chunk, nowMs) = (progress.chunk, lease.nowMillis)
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
        let (seq, app) = (row.0, row.5)
        guard let newProgress = progress.progressToStore(over: (row.1, row.2, row.3, row.4), owner: lease.owner)
        else { return .leaseLost }
        try await Self.recordFailures(progress.failures, requestSeq: seq, on: connection, logger: logger)
        if !progress.retries.isEmpty {
            try await Self.scheduleRetries(progress.retries, requestSeq: seq, on: connection, logger: logger)
            try await notifyWork(on: connection)
        }
        for invalidation in progress.invalidations {
            _ = try await Self.invalidate(app: app, invalidation, at: lease.now, on: connection, logger: logger)
        }
        try await connection.run(
            """
            UPDATE chunk SET progress = \(newProgress), lease_expires_at = \(lease.expiresAtMillis),
                state = \(Int16(progress.chunkState.rawValue)),
                accepted = accepted + \(Int64(progress.accepted)), skipped = skipped + \(Int64(progress.skipped)),
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
        return .recorded(leaseExpiresAt: lease.expiresAt)
    }
}
