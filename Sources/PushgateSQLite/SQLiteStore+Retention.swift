import GRDB
public import PushgateCore

/// Retention's SQL primitives (``LedgerPruning``); what to delete and in which batches is decided by
/// `LedgerRetention` in the core. Freed pages go to SQLite's freelist and are reused by later inserts, so
/// a file in steady state stops growing without a VACUUM (which would rewrite the whole file while holding
/// the writer).
extension SQLiteStore: LedgerPruning {
    public func retentionScan(after seq: Int64, limit: Int) async throws -> [RetentionCandidate] {
        let limit = try StoreError.positive(limit)
        return try await read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT seq, created_at, CASE WHEN state >= \(Code.done.rawValue) THEN finished_at END
                        FROM request WHERE seq > ? ORDER BY seq LIMIT ?
                        """
                ),
                arguments: [seq, limit]
            ).map { row in
                let finished: Int64? = row[2]
                return RetentionCandidate(
                    seq: row[0],
                    createdAt: Millis.date(row[1]),
                    finishedAt: finished.map(Millis.date)
                )
            }
        }
    }

    public func deleteRetainedDetails(of requests: [Int64], limit: Int) async throws -> Int {
        let limit = try StoreError.positive(limit)
        return try await write { db in
            let finished = try Self.finished(requests, in: db)
            guard !finished.isEmpty else { return 0 }
            let list = databaseQuestionMarks(count: finished.count)
            var deleted = 0
            // Set-based, a statement a table: a batch costs a few statements, not a few per request.
            for table in Self.detailTables where deleted < limit {
                try db.execute(
                    sql: """
                        DELETE FROM \(table.name) WHERE (request_seq, \(table.key)) IN (
                            SELECT request_seq, \(table.key) FROM \(table.name) WHERE request_seq IN (\(list)) LIMIT ?)
                        """,
                    arguments: StatementArguments(finished) + [limit - deleted]
                )
                deleted += db.changesCount
            }
            return deleted
        }
    }

    public func deleteRetainedRequests(_ requests: [Int64]) async throws -> PrunedRows {
        try await write { db in
            let finished = try Self.finished(requests, in: db)
            guard !finished.isEmpty else { return PrunedRows(requests: 0, rows: 0) }
            let list = databaseQuestionMarks(count: finished.count)
            var pruned = PrunedRows(requests: 0, rows: 0)
            // Explicitly rather than by the foreign keys' cascade: every row is counted, and the cascade's
            // per-table look-ups find nothing left to do.
            for table in Self.detailTables.map(\.name) + Self.requestTables {
                try db.execute(
                    sql: "DELETE FROM \(table) WHERE request_seq IN (\(list))",
                    arguments: StatementArguments(finished)
                )
                pruned.rows += db.changesCount
            }
            try db.execute(sql: "DELETE FROM request WHERE seq IN (\(list))", arguments: StatementArguments(finished))
            pruned.rows += db.changesCount
            pruned.requests = db.changesCount
            return pruned
        }
    }

    /// Tables with a row per device or direct token of a request, and the rest of their primary key.
    static let detailTables: [(name: String, key: String)] = [
        ("failure", "token"), ("request_token", "position"), ("retry", "token"), ("request_removed", "device_id"),
    ]
    /// Tables with a few rows per request.
    static let requestTables = ["chunk", "request_group", "request_unknown_group", "failure_count"]

    /// The finished requests among `requests`: only those may go.
    private static func finished(_ requests: [Int64], in db: Database) throws -> [Int64] {
        guard !requests.isEmpty else { return [] }
        return try Int64.fetchAll(
            db,
            sql: """
                SELECT seq FROM request
                WHERE seq IN (\(databaseQuestionMarks(count: requests.count))) AND state >= \(Code.done.rawValue)
                """,
            arguments: StatementArguments(requests)
        )
    }
}
