import Foundation
import Logging
import PostgresNIO
import PushgateCore
import PushgatePostgres
import Testing

/// The PostgreSQL server the tests run against: `PUSHGATE_TEST_POSTGRES_URL` (CI starts one with
/// scripts/postgres-test-cluster.sh). Each test works in a schema of its own, dropped afterwards, so the
/// tests run in parallel on one database.
enum TestDatabase {
    static let url = ProcessInfo.processInfo.environment["PUSHGATE_TEST_POSTGRES_URL"]
    static var isAvailable: Bool { url != nil }
    static let skipReason: Comment =
        "PUSHGATE_TEST_POSTGRES_URL is not set: no PostgreSQL server to test against (scripts/postgres-test-cluster.sh starts one)"

    static func configuration(schema: String) throws -> PostgresStore.Configuration {
        guard let url else { throw StoreError.invalidArgument("PUSHGATE_TEST_POSTGRES_URL is not set") }
        var configuration = try PostgresStore.Configuration(url: url)
        configuration.schema = schema
        configuration.maximumConnections = 4
        configuration.listensForWork = false
        return configuration
    }

    static func freshSchemaName() -> String {
        "test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(20)
    }

    /// Runs `body` with the name of a schema nobody uses, dropped (with everything in it) afterwards.
    static func withFreshSchema<R: Sendable>(_ body: @Sendable (String) async throws -> R) async throws -> R {
        let schema = freshSchemaName()
        do {
            let result = try await body(schema)
            try await administer { client in
                _ = try await client.query("DROP SCHEMA IF EXISTS \(unescaped: schema) CASCADE")
            }
            return result
        } catch {
            _ = try? await administer { client in
                _ = try await client.query("DROP SCHEMA IF EXISTS \(unescaped: schema) CASCADE")
            }
            throw error
        }
    }

    /// A migrated store in a fresh schema.
    static func withStore<R: Sendable>(_ body: @Sendable (PostgresStore) async throws -> R) async throws -> R {
        try await withFreshSchema { schema in
            try await PostgresStore.withStore(configuration: try configuration(schema: schema), logger: quietLogger) {
                store in
                try await body(store)
            }
        }
    }

    /// A plain client on the test database, for what the store does not offer (dropping schemas,
    /// looking at its tables).
    static func administer<R: Sendable>(_ body: @Sendable (PostgresClient) async throws -> R) async throws -> R {
        let configuration = try configuration(schema: "public")
        let client = PostgresClient(
            configuration: .init(
                host: configuration.host,
                port: configuration.port,
                username: configuration.username,
                password: configuration.password,
                database: configuration.database,
                tls: .disable
            ),
            backgroundLogger: quietLogger
        )
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            return try await body(client)
        }
    }

    /// The schema versions recorded in `schema`'s `pushgate_migration`, in order.
    static func migrationVersions(schema: String) async throws -> [Int32] {
        try await administer { client in
            var rows = [Int32]()
            for try await version in try await client.query(
                "SELECT version FROM \(unescaped: schema).pushgate_migration ORDER BY version"
            )
            .decode(Int32.self) {
                rows.append(version)
            }
            return rows
        }
    }

    static var quietLogger: Logger {
        var logger = Logger(label: "test.postgres")
        logger.logLevel =
            ProcessInfo.processInfo.environment["PUSHGATE_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
        return logger
    }
}
