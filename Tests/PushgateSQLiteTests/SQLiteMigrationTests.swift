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

    /// `PreviousRelease`'s rows, in SQLite's dialect.
    static let previousReleaseRows = PreviousRelease.rows(bytes: { "CAST('\($0)' AS BLOB)" }, yes: "1", no: "0")

    @Test("a file of the previous release opens, migrates, keeps its devices as APNs devices, and works")
    func previousReleaseFileKeepsWorking() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-old-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("pushgate.sqlite").path
        do {
            let queue = try DatabaseQueue(path: path)
            try SQLiteSchema.migrator().migrate(queue, upTo: Self.previousReleaseMigration)
            try await queue.write { db in
                for statement in Self.previousReleaseRows { try db.execute(sql: statement) }
            }
            try queue.close()
        }
        let store = try SQLiteStore(path: path)
        let applied = try await store.read { db in
            try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
        }
        #expect(
            applied.suffix(6) == [
                "v5: FCM, the request's fcm override",
                SQLiteTokenKeyTests.v6,
                SQLiteTokenKeyTests.v7,
                "v8: idempotency keys of requests",
                "v9: Web Push, the request's webpush override",
                "v10: the report split by service",
            ],
            "the new migrations ran on open"
        )
        try await PreviousRelease.check.run { store }
        try store.close()
    }
}
