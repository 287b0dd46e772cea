import Foundation
import GRDB
public import PushgateCore

/// Chunks of a request's targets: claimed under a lease, read in pages, progress recorded.
extension SQLiteStore {
    // MARK: - Chunks

    public func claimChunk(_ lease: LeaseWindow, chunkSize: Int) async throws -> WorkChunk? {
        let chunkSize = try StoreError.positive(chunkSize, "chunk size")
        return try await writeUnsynced { db in try Self.claimChunk(lease, chunkSize: chunkSize, in: db) }
    }

    /// ``claimChunk(_:chunkSize:)`` in a write transaction of the caller's.
    static func claimChunk(_ lease: LeaseWindow, chunkSize: Int, in db: Database) throws -> WorkChunk? {
        let (nowMs, leaseUntil) = (lease.nowMillis, lease.expiresAtMillis)
        _ = try Self.expireOverdue(nowMs: nowMs, in: db)

        // 1. Take over a chunk whose holder stopped renewing its lease.
        if let row = try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT c.id, r.id, c.kind, c.range_after, c.range_through, c.progress, c.generation
                    FROM chunk c JOIN request r ON r.seq = c.request_seq
                    WHERE c.state = \(ChunkCode.open.rawValue) AND c.lease_expires_at <= ?
                    ORDER BY c.request_seq, c.id LIMIT 1
                    """
            ),
            arguments: [nowMs]
        ) {
            let taken: StoredForm.TakenOverChunk = (row[0], row[1], row[2], row[3], row[4], row[5], row[6] + 1)
            try db.cachedStatement(
                sql: "UPDATE chunk SET owner = ?, lease_expires_at = ?, generation = ? WHERE id = ?"
            ).execute(arguments: [lease.owner.value, leaseUntil, taken.generation, taken.id])
            return try StoredForm.chunk(takenOver: taken, lease)
        }

        // 2. Cut the next chunk of the most deserving request with uncut targets (``ClaimScheduler``).
        while let row = try Self.scheduledRequest(in: db) {
            let seq: Int64 = row[0]
            let requestID = try StoredForm.requestID(row[1])
            let groupIDs = try Int64.fetchAll(
                db.cachedStatement(
                    sql: "SELECT group_id FROM request_group WHERE request_seq = ? ORDER BY group_id"
                ),
                arguments: [seq]
            )
            let stored: (Int64, Int64, Int64, Int64) = (row[2], row[3], row[4], row[5])
            let cursor = LedgerArithmetic.CutCursor(stored: stored, hasGroups: !groupIDs.isEmpty)
            let cut: LedgerArithmetic.Cut
            switch LedgerArithmetic.nextCut(cursor, chunkSize: chunkSize) {
            case .tokens(let tokens): cut = tokens
            case .members(let scan):
                guard let members = scan.cut(found: try Self.cutMembers(groupIDs: groupIDs, scan, in: db))
                else {
                    try db.cachedStatement(sql: "UPDATE request SET cut_done = 1 WHERE seq = ?").execute(arguments: [
                        seq
                    ])
                    try Self.finishIfDone(requestSeq: seq, nowMs: nowMs, in: db)
                    continue
                }
                cut = members
            }
            try db.execute(
                sql: """
                    UPDATE request SET \(StoredForm.cutCursorColumn(cut.kind)) = ?, cut_done = ?,
                        state = max(state, ?)
                    WHERE seq = ?
                    """,
                arguments: [cut.through, cut.cutDone, Code.sending.rawValue, seq]
            )
            try db.cachedStatement(
                sql: """
                    INSERT INTO chunk (request_seq, kind, range_after, range_through, progress, state, owner,
                                       lease_expires_at, generation)
                    VALUES (?, ?, ?, ?, ?, \(ChunkCode.open.rawValue), ?, ?, 1)
                    """
            ).execute(arguments: [
                seq, StoredForm.ChunkKindCode(cut.kind).rawValue, cut.after, cut.through, cut.after,
                lease.owner.value, leaseUntil,
            ])
            return WorkChunk.cut(id: db.lastInsertedRowID, of: requestID, cut, leaseExpiresAt: lease.expiresAt)
        }
        return nil
    }

    /// The request whose next chunk ``ClaimScheduler`` cuts: the oldest unfinished requests with uncut
    /// targets (through `request_unfinished`), each with its newest chunk (the larger of its newest open
    /// and newest done chunk: two lookups at the end of `chunk_by_request`'s range, whatever the number of
    /// chunks), and, only when there is more than one, the newest chunk overall and, when more than one
    /// app waits, the apps of the most recent chunks (a range of `chunk`'s primary key).
    /// Returns the request's row: seq, id, device_bound, group_cut, token_cut, token_count.
    static func scheduledRequest(in db: Database) throws -> Row? {
        let rows = try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT r.seq, r.id, r.device_bound, r.group_cut, r.token_cut, r.token_count, r.app, r.priority,
                        nullif(max(
                        coalesce((SELECT max(c.id) FROM chunk c WHERE c.request_seq = r.seq AND c.state = 0), 0),
                        coalesce((SELECT max(c.id) FROM chunk c WHERE c.request_seq = r.seq AND c.state = 1), 0)), 0)
                    FROM request r WHERE r.state < \(Code.done.rawValue) AND r.cut_done = 0
                    ORDER BY r.seq LIMIT \(ClaimScheduler.candidateLimit)
                    """
            )
        )
        guard rows.count > 1 else { return rows.first }
        let candidates = rows.map {
            ClaimScheduler.Candidate(seq: $0[0], app: $0[6], priority: $0[7], lastTurn: $0[8])
        }
        func row(_ seq: Int64?) -> Row? { rows.first { $0[0] == seq } }
        let latest = try Int64.fetchOne(db.cachedStatement(sql: "SELECT coalesce(max(id), 0) FROM chunk")) ?? 0
        guard Set(candidates.map(\.app)).count > 1 else {
            // One app: its turn does not matter, only the newest turn (for who is overdue).
            return row(ClaimScheduler.next(candidates, recentAppTurns: [candidates[0].app: latest]))
        }
        let recent = try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT r.app, max(c.id) FROM chunk c JOIN request r ON r.seq = c.request_seq
                    WHERE c.id > ? GROUP BY r.app
                    """
            ),
            arguments: [latest - ClaimScheduler.recentTurnWindow]
        )
        let turns = Dictionary(recent.map { ($0[0] as String, $0[1] as Int64) }, uniquingKeysWith: max)
        return row(ClaimScheduler.next(candidates, recentAppTurns: turns))
    }

    public func targets(of chunk: WorkChunk, after cursor: Int64, limit: Int) async throws -> TargetPage {
        let scan = try TargetScan(chunk: chunk, after: cursor, limit: limit)
        if scan.isDone { return try scan.page(found: []) }
        return try await read { db in try Self.targetPage(scan, of: chunk, in: db) }
    }

    /// ``targets(of:after:limit:)`` on a connection of the caller's (a read, or the writer in the middle
    /// of its transaction).
    static func targetPage(of chunk: WorkChunk, after cursor: Int64, limit: Int, in db: Database) throws -> TargetPage {
        let scan = try TargetScan(chunk: chunk, after: cursor, limit: limit)
        if scan.isDone { return try scan.page(found: []) }
        return try targetPage(scan, of: chunk, in: db)
    }

    private static func targetPage(_ scan: TargetScan, of chunk: WorkChunk, in db: Database) throws -> TargetPage {
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT c.request_seq, r.app, r.created_at FROM chunk c JOIN request r ON r.seq = c.request_seq
                        WHERE c.id = ?
                        """
                ),
                arguments: [chunk.id]
            )
        else { throw StoreError.invalidArgument("unknown chunk \(chunk.id)") }
        let seq: Int64 = row[0]
        let created: Int64 = row[2]
        switch chunk.kind {
        case .deviceRange:
            let groupIDs = try Int64.fetchAll(
                try db.cachedStatement(sql: "SELECT group_id FROM request_group WHERE request_seq = ?"),
                arguments: [seq]
            )
            let page = try scan.page(
                rows: Self.deviceTargets(groupIDs: groupIDs, scan, invalidatedSince: created, in: db)
            )
            return try Self.addingRemoved(to: page, requestSeq: seq, after: scan.after, in: db)
        case .directTokens:
            return try scan.page(
                rows: Self.tokenTargets(requestSeq: seq, app: row[1], scan, invalidatedSince: created, in: db)
            )
        }
    }

    public func recordProgress(_ progress: ChunkProgress, renewing lease: LeaseWindow) async throws -> ProgressResult {
        try await write { db in try Self.recordProgress(progress, renewing: lease, in: db) }
    }

    /// ``recordProgress(_:renewing:)`` in a write transaction of the caller's.
    static func recordProgress(
        _ progress: ChunkProgress,
        renewing lease: LeaseWindow,
        in db: Database
    ) throws -> ProgressResult {
        let chunk = progress.chunk
        guard
            let row = try Row.fetchOne(
                try db.cachedStatement(
                    sql: """
                        SELECT c.request_seq, c.owner, c.generation, c.state, c.progress, r.app
                        FROM chunk c JOIN request r ON r.seq = c.request_seq WHERE c.id = ?
                        """
                ),
                arguments: [chunk.id]
            )
        else { return .leaseLost }
        let held: StoredForm.ChunkLease = (row[1], row[2], row[3], row[4])
        guard let newProgress = progress.progressToStore(over: held, owner: lease.owner) else { return .leaseLost }
        let seq: Int64 = row[0]
        let app: String = row[5]

        try Self.recordAccepted(0, apnsID: progress.lastAPNsID, requestSeq: seq, in: db)
        try Self.recordFailures(progress.failures, requestSeq: seq, in: db)
        let upsertRetry = try db.cachedStatement(
            sql: """
                INSERT INTO retry (request_seq, token, attempt, next_attempt_at, last_reason)
                VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (request_seq, token) DO UPDATE SET
                    attempt = excluded.attempt, next_attempt_at = excluded.next_attempt_at,
                    last_reason = excluded.last_reason, owner = NULL, lease_expires_at = 0
                """
        )
        for retry in progress.retries {
            try upsertRetry.execute(arguments: [
                seq, retry.token.storageKey, retry.attempt, Millis.from(retry.nextAttemptAt), retry.reason,
            ])
        }
        for invalidation in progress.invalidations {
            _ = try Self.invalidate(app: app, invalidation, at: lease.now, in: db)
        }
        try db.cachedStatement(
            sql: """
                UPDATE chunk SET progress = ?, lease_expires_at = ?, state = ?, accepted = accepted + ?,
                    skipped = skipped + ?
                WHERE id = ?
                """
        ).execute(arguments: [
            newProgress, lease.expiresAtMillis, progress.chunkState.rawValue, progress.accepted, progress.skipped,
            chunk.id,
        ])
        if progress.completesChunk {
            try Self.finishIfDone(requestSeq: seq, nowMs: lease.nowMillis, in: db)
            return .chunkCompleted
        }
        return .recorded(leaseExpiresAt: lease.expiresAt)
    }
}
