import GRDB
import PushgateCore

/// What tests (and an operator's debug endpoint, later) can ask about the database itself.
extension SQLiteStore {
    /// The connection settings that matter for durability and for the registry's write rate, as SQLite
    /// reports them on the write connection.
    struct Pragmas: Equatable, Sendable {
        var journalMode: String
        /// 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA.
        var synchronous: Int
        var foreignKeys: Bool
        var busyTimeoutMilliseconds: Int
        /// `PRAGMA cache_size`: pages if positive, KiB if negative.
        var cacheSize: Int
        /// `PRAGMA wal_autocheckpoint`, in pages.
        var walAutocheckpointPages: Int
        /// `PRAGMA journal_size_limit`, in bytes (-1: none).
        var journalSizeLimit: Int
    }

    func pragmas() async throws -> Pragmas {
        try await write { db in
            Pragmas(
                journalMode: try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "",
                synchronous: try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1,
                foreignKeys: try Bool.fetchOne(db, sql: "PRAGMA foreign_keys") ?? false,
                busyTimeoutMilliseconds: try Int.fetchOne(db, sql: "PRAGMA busy_timeout") ?? -1,
                cacheSize: try Int.fetchOne(db, sql: "PRAGMA cache_size") ?? 0,
                walAutocheckpointPages: try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint") ?? -1,
                journalSizeLimit: try Int.fetchOne(db, sql: "PRAGMA journal_size_limit") ?? -1
            )
        }
    }

    /// The database's pages as SQLite counts them (the WAL's newer pages included): what retention keeps
    /// flat. Free pages are in the file, waiting to be reused.
    package struct PageUse: Equatable, Sendable {
        package var pageSize: Int64
        package var pages: Int64
        package var freePages: Int64
        /// Bytes of pages in use: `(page_count - freelist_count) * page_size`.
        package var usedBytes: Int64 { (pages - freePages) * pageSize }
        /// The file's size once checkpointed: `page_count * page_size`.
        package var fileBytes: Int64 { pages * pageSize }
    }

    package func pageUse() async throws -> PageUse {
        try await read { db in
            PageUse(
                pageSize: try Int64.fetchOne(db, sql: "PRAGMA page_size") ?? 0,
                pages: try Int64.fetchOne(db, sql: "PRAGMA page_count") ?? 0,
                freePages: try Int64.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
            )
        }
    }

    /// SQLite's plan for one group's page of fan-out targets (the query every page runs once per group).
    func fanOutPageQueryPlan() async throws -> [String] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    EXPLAIN QUERY PLAN
                    SELECT m.device_id, d.token FROM membership m JOIN device d ON d.id = m.device_id
                    WHERE m.group_id = 1 AND m.device_id > 0 AND m.device_id <= 100 AND d.state = 0
                    ORDER BY m.device_id LIMIT 10
                    """
            ).map { $0["detail"] as String }
        }
    }
}
