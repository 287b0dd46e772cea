import Foundation
import GRDB
import PushgateCore
import StoreConformance
import Testing

@testable import PushgateSQLite

@Suite("SQLite store: a file of the release before FCM")
struct SQLiteMigrationTests {
    /// The last migration of the release before FCM.
    static let previousReleaseMigration = "v4: accepted counts on chunks, as in PostgreSQL"

    /// `PreviousRelease`'s rows, in SQLite's dialect of the v4 schema.
    static let previousReleaseRows: [String] = {
        typealias P = PreviousRelease
        return [
            """
            INSERT INTO device (app, token, state, registered_at, last_registered_at, invalidated_at, invalid_reason)
            VALUES ('\(P.app)', '\(P.validToken)', 0, \(P.registeredAtMillis), \(P.registeredAtMillis), NULL, NULL),
                   ('\(P.app)', '\(P.invalidToken)', 1, \(P.registeredAtMillis), \(P.registeredAtMillis),
                    \(P.invalidatedAtMillis), 'Unregistered')
            """,
            """
            INSERT INTO device_group (app, name, created_at) VALUES ('\(P.app)', '\(P.group)', \(P.registeredAtMillis))
            """,
            "INSERT INTO membership (group_id, device_id) SELECT g.id, d.id FROM device_group g, device d",
            """
            INSERT INTO request (id, app, push_type, priority, expiration, collapse_id, payload, created_at, state,
                                 target_count, device_bound, group_cut, token_cut, token_count, cut_done, accepted)
            VALUES ('\(P.requestID)', '\(P.app)', 'alert', 10, NULL, NULL, CAST('\(P.payloadJSON)' AS BLOB),
                    \(P.createdAtMillis), 1, 2, 2, 2, 1, 1, 1, 0)
            """,
            "INSERT INTO request_group (request_seq, group_id) SELECT r.seq, g.id FROM request r, device_group g",
            """
            INSERT INTO request_token (request_seq, position, token, covered)
            SELECT seq, 1, '\(P.directToken)', 0 FROM request
            """,
            """
            INSERT INTO retry (request_seq, token, attempt, next_attempt_at, last_reason)
            SELECT seq, '\(P.validToken)', 1, \(P.retryDueMillis), 'TooManyRequests' FROM request
            """,
            """
            INSERT INTO failure (request_seq, token, reason, status, failed_at)
            SELECT seq, '\(P.invalidToken)', 'Unregistered', 410, \(P.invalidatedAtMillis) FROM request
            """,
            "INSERT INTO failure_count (request_seq, reason, count) SELECT seq, 'Unregistered', 1 FROM request",
        ]
    }()

    @Test("a file of the previous release opens, migrates, keeps its devices as APNs devices, and works")
    func previousReleaseFileKeepsWorking() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-old-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("pushgate.sqlite").path
        do {
            let queue = try DatabaseQueue(path: path)
            try SQLiteSchema.migrator.migrate(queue, upTo: Self.previousReleaseMigration)
            try await queue.write { db in
                for statement in Self.previousReleaseRows { try db.execute(sql: statement) }
            }
            try queue.close()
        }
        let store = try SQLiteStore(path: path)
        let applied = try await store.read { db in
            try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
        }
        #expect(applied.last == "v5: FCM, the request's fcm override", "the new migration ran on open")
        try await PreviousRelease.check.run { store }
        try store.close()
    }
}
