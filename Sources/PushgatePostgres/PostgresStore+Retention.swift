import Logging
import PostgresNIO
public import PushgateCore

/// Retention's SQL primitives (``LedgerPruning``); what to delete and in which batches is decided by
/// `LedgerRetention` in the core. Small batches, each its own short transaction, suit autovacuum: the
/// dead rows of one batch are few, the tables' free space is reused by later inserts, and no long
/// transaction holds back the horizon that vacuum cleans up to (no VACUUM FULL is needed, or run).
extension PostgresStore: LedgerPruning {
    public func retentionScan(after seq: Int64, limit: Int) async throws -> [RetentionCandidate] {
        let limit = Int64(try StoreError.positive(limit))
        return try await read { connection in
            try await connection.all(
                """
                SELECT seq, created_at, CASE WHEN state >= \(unescaped: Self.sql(Code.done)) THEN finished_at END
                FROM request WHERE seq > \(seq) ORDER BY seq LIMIT \(limit)
                """,
                as: (Int64, Int64, Int64?).self,
                logger: logger
            ).map { seq, created, finished in
                RetentionCandidate(seq: seq, createdAt: Millis.date(created), finishedAt: finished.map(Millis.date))
            }
        }
    }

    public func deleteRetainedDetails(of requests: [Int64], limit: Int) async throws -> Int {
        let limit = try StoreError.positive(limit)
        return try await transaction { connection in
            // The ledger's lock order: request rows first. Only finished ones: nothing else may go.
            let finished = try await Self.lockFinished(requests, on: connection, logger: logger)
            var deleted = 0
            for table in ["failure", "request_token", "retry", "request_removed"] where deleted < limit {
                let rows = try await connection.all(
                    """
                    DELETE FROM \(unescaped: table) WHERE ctid = ANY(ARRAY(
                        SELECT ctid FROM \(unescaped: table) WHERE request_seq = ANY(\(finished)::BIGINT[])
                        LIMIT \(Int64(limit - deleted))))
                    RETURNING 1
                    """,
                    as: Int32.self,
                    logger: logger
                )
                deleted += rows.count
            }
            return deleted
        }
    }

    public func deleteRetainedRequests(_ requests: [Int64]) async throws -> PrunedRows {
        try await transaction { connection in
            let finished = try await Self.lockFinished(requests, on: connection, logger: logger)
            guard !finished.isEmpty else { return PrunedRows(requests: 0, rows: 0) }
            // Explicitly rather than by the foreign keys' cascade: every row is counted, in one statement.
            let counts: (Int64, Int64)? = try await connection.first(
                """
                WITH f AS (DELETE FROM failure WHERE request_seq = ANY(\(finished)::BIGINT[]) RETURNING 1),
                t AS (DELETE FROM request_token WHERE request_seq = ANY(\(finished)::BIGINT[]) RETURNING 1),
                r AS (DELETE FROM retry WHERE request_seq = ANY(\(finished)::BIGINT[]) RETURNING 1),
                m AS (DELETE FROM request_removed WHERE request_seq = ANY(\(finished)::BIGINT[]) RETURNING 1),
                c AS (DELETE FROM chunk WHERE request_seq = ANY(\(finished)::BIGINT[]) RETURNING 1),
                g AS (DELETE FROM request_group WHERE request_seq = ANY(\(finished)::BIGINT[]) RETURNING 1),
                u AS (DELETE FROM request_unknown_group WHERE request_seq = ANY(\(finished)::BIGINT[]) RETURNING 1),
                n AS (DELETE FROM failure_count WHERE request_seq = ANY(\(finished)::BIGINT[]) RETURNING 1),
                q AS (DELETE FROM request WHERE seq = ANY(\(finished)::BIGINT[]) RETURNING 1)
                SELECT (SELECT COUNT(*) FROM f) + (SELECT COUNT(*) FROM t) + (SELECT COUNT(*) FROM r)
                    + (SELECT COUNT(*) FROM m) + (SELECT COUNT(*) FROM c) + (SELECT COUNT(*) FROM g)
                    + (SELECT COUNT(*) FROM u) + (SELECT COUNT(*) FROM n) + (SELECT COUNT(*) FROM q),
                    (SELECT COUNT(*) FROM q)
                """,
                as: (Int64, Int64).self,
                logger: logger
            )
            return PrunedRows(requests: Int(counts?.1 ?? 0), rows: Int(counts?.0 ?? 0))
        }
    }

    /// Locks the finished requests among `requests` (`FOR UPDATE`, in sequence order) and answers them.
    private static func lockFinished(
        _ requests: [Int64],
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> [Int64] {
        try await connection.all(
            """
            SELECT seq FROM request WHERE seq = ANY(\(requests)::BIGINT[])
                AND state >= \(unescaped: sql(Code.done)) ORDER BY seq FOR UPDATE
            """,
            as: Int64.self,
            logger: logger
        )
    }
}
