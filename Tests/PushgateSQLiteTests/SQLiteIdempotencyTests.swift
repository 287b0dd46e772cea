import Foundation
import GRDB
import PushgateCore
import Testing

@testable import PushgateSQLite

@Suite("SQLite store: idempotency keys (schema v8)")
struct SQLiteIdempotencyTests {
    @Test("the key look-up is a search of the partial unique index, not a scan of the requests")
    func lookupUsesTheIndex() async throws {
        try await withTemporaryStore { store in
            let plan = try await store.read { db in
                try Row.fetchAll(
                    db,
                    sql: """
                        EXPLAIN QUERY PLAN SELECT seq, id, target_count, idempotency_fingerprint, created_at
                        FROM request WHERE app = ? AND idempotency_key = ?
                        """,
                    arguments: ["default", "k"]
                ).map { $0["detail"] as String }
            }
            #expect(plan.count == 1)
            #expect(plan.first?.hasPrefix("SEARCH request USING INDEX request_by_idempotency_key") == true, "\(plan)")
        }
    }
}
