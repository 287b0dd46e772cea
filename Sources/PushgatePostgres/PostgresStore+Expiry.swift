import Logging
import PostgresNIO
import PushgateCore

/// Overdue requests expired (by `expireOverdue(now:)` and at the start of every claim).
extension PostgresStore {
    /// Expires every unfinished request whose expiration is before `nowMs`: the steps of ``LedgerExpiry``,
    /// each with its statements. Requests another instance is working on right now (row locked) are left
    /// for the next call.
    static func expireOverdue(
        nowMs: Int64,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> [RequestID] {
        var expiry = LedgerExpiry(nowMillis: nowMs)
        var action = expiry.start()
        while true {
            switch action {
            case .readOverdue(let nowMs):
                action = expiry.overdueRead(try await lockOverdue(nowMs: nowMs, on: connection, logger: logger))
            case .failRetries(let seq, let nowMs):
                let failed = try await connection.all(
                    """
                    INSERT INTO failure (request_seq, token, reason, status, failed_at)
                    SELECT request_seq, token, \(FailureEntry.expiredReason), NULL, \(nowMs) FROM retry WHERE request_seq = \(seq)
                    ON CONFLICT (request_seq, token) DO NOTHING
                    RETURNING token
                    """,
                    as: String.self,
                    logger: logger
                ).count
                try await connection.run("DELETE FROM retry WHERE request_seq = \(seq)", logger: logger)
                action = expiry.retriesFailed(failed)
            case .readUnsent(let seq):
                let groupIDs = try await connection.all(
                    "SELECT group_id FROM request_group WHERE request_seq = \(seq) ORDER BY group_id",
                    as: Int64.self,
                    logger: logger
                )
                let openChunks = try await connection.all(
                    """
                    SELECT kind::BIGINT, progress, range_through FROM chunk
                    WHERE request_seq = \(seq) AND state = \(unescaped: Self.sql(ChunkCode.open))
                    """,
                    as: (Int64, Int64, Int64).self,
                    logger: logger
                ).map { (kind: StoredForm.chunkKind($0.0), progress: $0.1, through: $0.2) }
                action = expiry.unsentRead(groupIDs: groupIDs, openChunks: openChunks)
            case .countRemovedTargets(let seq, let after, let through):
                let removed = try await removedTargets(
                    requestSeq: seq,
                    after: after,
                    through: through,
                    on: connection,
                    logger: logger
                )
                action = expiry.counted(removed.count)
            case .countDeviceTargets(let groupIDs, let after, let through, let since):
                action = expiry.counted(
                    try await countDeviceTargets(
                        groupIDs: groupIDs,
                        after: after,
                        through: through,
                        invalidatedSince: since,
                        on: connection,
                        logger: logger
                    ).total
                )
            case .countTokenTargets(let seq, let app, let after, let through, let since):
                action = expiry.counted(
                    try await countTokenTargets(
                        requestSeq: seq,
                        app: app,
                        after: after,
                        through: through,
                        invalidatedSince: since,
                        on: connection,
                        logger: logger
                    )
                )
            case .addExpiredCount(let seq, let count):
                try await addFailureCount(
                    count,
                    reason: FailureEntry.expiredReason,
                    requestSeq: seq,
                    on: connection,
                    logger: logger
                )
                action = expiry.failuresCounted()
            case .close(let seq, let nowMs):
                try await connection.run(
                    """
                    UPDATE chunk SET state = \(unescaped: Self.sql(ChunkCode.done)), generation = generation + 1
                    WHERE request_seq = \(seq) AND state = \(unescaped: Self.sql(ChunkCode.open))
                    """,
                    logger: logger
                )
                try await connection.run(
                    """
                    UPDATE request SET state = \(unescaped: Self.sql(Code.expired)), finished_at = \(nowMs), cut_done = TRUE
                    WHERE seq = \(seq)
                    """,
                    logger: logger
                )
                try await forgetRemovedTargets(requestSeq: seq, on: connection, logger: logger)
                action = expiry.closed()
            case .finished(let expired):
                return expired
            }
        }
    }

    /// Locks the unfinished requests whose expiration is before `nowMs`, skipping those locked.
    private static func lockOverdue(
        nowMs: Int64,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> [LedgerExpiry.Overdue] {
        try await connection.all(
            """
            SELECT seq, id, app, device_bound, group_cut, token_cut, token_count, cut_done, created_at FROM request
            WHERE state < \(unescaped: Self.sql(Code.done)) AND expiration > 0 AND expiration * 1000 < \(nowMs)
            ORDER BY seq FOR UPDATE SKIP LOCKED
            """,
            as: (Int64, String, String, Int64, Int64, Int64, Int64, Bool, Int64).self,
            logger: logger
        ).map { seq, id, app, bound, groupCut, tokenCut, tokenCount, cutDone, created in
            LedgerExpiry.Overdue(
                seq: seq,
                id: try StoredForm.requestID(id),
                app: app,
                bound: bound,
                groupCut: groupCut,
                tokenCut: tokenCut,
                tokenCount: tokenCount,
                cutDone: cutDone,
                createdAt: created
            )
        }
    }
}
