import Foundation
import PostgresNIO
import PushgateCore
import StoreConformance
import Testing

@testable import PushgatePostgres

@Suite(
    "PostgreSQL store: a schema of the release before FCM",
    .enabled(if: TestDatabase.isAvailable, TestDatabase.skipReason)
)
struct PostgresMigrationTests {
    /// The last schema version of the release before FCM.
    static let previousReleaseVersion = 3

    /// `PreviousRelease`'s rows, in PostgreSQL's dialect of the version 3 schema.
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
            VALUES ('\(P.requestID)', '\(P.app)', 'alert', 10, NULL, NULL, convert_to('\(P.payloadJSON)', 'UTF8'),
                    \(P.createdAtMillis), 1, 2, 2, 2, 1, 1, TRUE, 0)
            """,
            "INSERT INTO request_group (request_seq, group_id) SELECT r.seq, g.id FROM request r, device_group g",
            """
            INSERT INTO request_token (request_seq, position, token, covered)
            SELECT seq, 1, '\(P.directToken)', FALSE FROM request
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

    @Test("a schema of the previous release migrates, keeps its devices as APNs devices, and works")
    func previousReleaseSchemaKeepsWorking() async throws {
        try await TestDatabase.withFreshSchema { schema in
            try await TestDatabase.administer { client in
                try await client.withConnection { connection in
                    let logger = TestDatabase.quietLogger
                    try await connection.query("CREATE SCHEMA \(unescaped: schema)", logger: logger)
                    try await connection.query("SET search_path TO \(unescaped: schema)", logger: logger)
                    // The store's migration table (it creates it only if missing), with the versions applied.
                    try await connection.query(
                        """
                        CREATE TABLE pushgate_migration (
                            version INTEGER PRIMARY KEY, name TEXT NOT NULL,
                            applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
                            applied_by_pid INTEGER NOT NULL DEFAULT pg_backend_pid())
                        """,
                        logger: logger
                    )
                    let previous = PostgresSchema.migrations.filter { $0.version <= Self.previousReleaseVersion }
                    for migration in previous {
                        for statement in migration.statements {
                            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                        }
                        try await connection.query(
                            """
                            INSERT INTO pushgate_migration (version, name)
                            VALUES (\(migration.version), \(migration.name))
                            """,
                            logger: logger
                        )
                    }
                    for statement in Self.previousReleaseRows {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                    try await connection.query("RESET search_path", logger: logger)
                }
            }
            try await PostgresStore.withStore(
                configuration: try TestDatabase.configuration(schema: schema),
                logger: TestDatabase.quietLogger
            ) { store in
                try await PreviousRelease.check.run { store }
            }
            let versions = try await TestDatabase.administer { client in
                var rows = [Int32]()
                for try await version in try await client.query(
                    "SELECT version FROM \(unescaped: schema).pushgate_migration ORDER BY version"
                )
                .decode(Int32.self) {
                    rows.append(version)
                }
                return rows
            }
            #expect(versions == [1, 2, 3, 4], "the FCM migration was applied on top of the previous release's")
        }
    }
}
