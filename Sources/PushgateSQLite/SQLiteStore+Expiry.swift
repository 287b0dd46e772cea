import GRDB
import PushgateCore

/// Overdue requests expired (by `expireOverdue(now:)` and at the start of every claim).
extension SQLiteStore {
    /// Expires every unfinished request whose expiration is before `nowMs`: the steps of
    /// ``LedgerExpiry``, each with its statements.
    static func expireOverdue(nowMs: Int64, in db: Database) throws -> [RequestID] {
        var expiry = LedgerExpiry(nowMillis: nowMs)
        var action = expiry.start()
        while true {
            switch action {
            case .readOverdue(let nowMs):
                action = expiry.overdueRead(try overdueRequests(nowMs: nowMs, in: db))
            case .failRetries(let seq, let nowMs):
                try db.cachedStatement(
                    sql: """
                        INSERT INTO failure (request_seq, token, reason, status, failed_at)
                        SELECT request_seq, token, ?, NULL, ? FROM retry WHERE request_seq = ?
                        ON CONFLICT (request_seq, token) DO NOTHING
                        """
                ).execute(arguments: [FailureEntry.expiredReason, nowMs, seq])
                let failed = db.changesCount
                try db.cachedStatement(sql: "DELETE FROM retry WHERE request_seq = ?").execute(arguments: [seq])
                action = expiry.retriesFailed(failed)
            case .readUnsent(let seq):
                let groupIDs = try Int64.fetchAll(
                    db.cachedStatement(sql: "SELECT group_id FROM request_group WHERE request_seq = ?"),
                    arguments: [seq]
                )
                let openChunks = try Row.fetchAll(
                    db.cachedStatement(
                        sql: """
                            SELECT kind, progress, range_through FROM chunk
                            WHERE request_seq = ? AND state = \(ChunkCode.open.rawValue)
                            """
                    ),
                    arguments: [seq]
                ).map { chunk in
                    (kind: StoredForm.chunkKind(chunk[0]), progress: chunk[1] as Int64, through: chunk[2] as Int64)
                }
                action = expiry.unsentRead(groupIDs: groupIDs, openChunks: openChunks)
            case .countRemovedTargets(let seq, let after, let through):
                action = expiry.counted(
                    try removedTargets(requestSeq: seq, after: after, through: through, in: db).count
                )
            case .countDeviceTargets(let groupIDs, let after, let through, let since):
                action = expiry.counted(
                    try countDeviceTargets(
                        groupIDs: groupIDs,
                        after: after,
                        through: through,
                        invalidatedSince: since,
                        in: db
                    ).total
                )
            case .countTokenTargets(let seq, let app, let after, let through, let since):
                action = expiry.counted(
                    try countTokenTargets(
                        requestSeq: seq,
                        app: app,
                        after: after,
                        through: through,
                        invalidatedSince: since,
                        in: db
                    )
                )
            case .addExpiredCount(let seq, let count):
                try addFailureCount(count, reason: FailureEntry.expiredReason, requestSeq: seq, in: db)
                action = expiry.failuresCounted()
            case .close(let seq, let nowMs):
                try db.cachedStatement(
                    sql: """
                        UPDATE chunk SET state = \(ChunkCode.done.rawValue), generation = generation + 1
                        WHERE request_seq = ? AND state = \(ChunkCode.open.rawValue)
                        """
                ).execute(arguments: [seq])
                try db.cachedStatement(
                    sql:
                        "UPDATE request SET state = \(Code.expired.rawValue), finished_at = ?, cut_done = 1 WHERE seq = ?"
                ).execute(arguments: [nowMs, seq])
                try forgetRemovedTargets(requestSeq: seq, in: db)
                action = expiry.closed()
            case .finished(let expired):
                return expired
            }
        }
    }

    /// The unfinished requests whose expiration is before `nowMs`.
    private static func overdueRequests(nowMs: Int64, in db: Database) throws -> [LedgerExpiry.Overdue] {
        try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT seq, id, app, device_bound, group_cut, token_cut, token_count, cut_done, created_at
                    FROM request
                    WHERE state < \(Code.done.rawValue) AND expiration > 0 AND expiration * 1000 < ?
                    """
            ),
            arguments: [nowMs]
        ).map { row in
            LedgerExpiry.Overdue(
                seq: row[0],
                id: try StoredForm.requestID(row[1]),
                app: row[2],
                bound: row[3],
                groupCut: row[4],
                tokenCut: row[5],
                tokenCount: row[6],
                cutDone: row[7] as Int64 != 0,
                createdAt: row[8]
            )
        }
    }
}
