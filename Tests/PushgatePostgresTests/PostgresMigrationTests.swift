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

    /// `PreviousRelease`'s rows, in PostgreSQL's dialect.
    static let previousReleaseRows = PreviousRelease.rows(
        bytes: { "convert_to('\($0)', 'UTF8')" },
        yes: "TRUE",
        no: "FALSE"
    )

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
            let versions = try await TestDatabase.migrationVersions(schema: schema)
            #expect(
                versions == PostgresSchema.migrations.map { Int32($0.version) },
                "the later migrations were applied on top of the previous release's"
            )
        }
    }

    @Test("failures are keyed in byte order (failure.token is COLLATE \"C\"), whatever the database's collation")
    func failureTokensInByteOrder() async throws {
        try await TestDatabase.withFreshSchema { schema in
            try await PostgresStore.withStore(
                configuration: try TestDatabase.configuration(schema: schema),
                logger: TestDatabase.quietLogger
            ) { _ in }
            let collations = try await TestDatabase.administer { client in
                var names = [String?]()
                for try await name in try await client.query(
                    """
                    SELECT collation_name::TEXT FROM information_schema.columns
                    WHERE table_schema = \(schema) AND table_name = 'failure' AND column_name = 'token'
                    """
                )
                .decode(String?.self) {
                    names.append(name)
                }
                return names
            }
            #expect(collations == ["C"])
        }
    }
}
