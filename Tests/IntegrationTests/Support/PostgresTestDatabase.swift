import Foundation
import Logging
import PushgateCore
import PushgatePostgres

/// The PostgreSQL server named by `PUSHGATE_TEST_POSTGRES_URL` (CI starts one with
/// scripts/postgres-test-cluster.sh), and a schema of its own per test.
struct PostgresTestDatabase: Sendable {
    static let url = ProcessInfo.processInfo.environment["PUSHGATE_TEST_POSTGRES_URL"]
    static var isAvailable: Bool { url != nil }

    /// The server's configuration in this test's schema.
    let configuration: PostgresStore.Configuration

    /// A fresh, empty schema name on the test server (nothing is created until a store starts).
    init() throws {
        guard let url = Self.url else { throw ExternalTools.ToolError("PUSHGATE_TEST_POSTGRES_URL is not set") }
        var configuration = try PostgresStore.Configuration(url: url)
        configuration.schema = "it_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(20)
        configuration.listensForWork = false
        self.configuration = configuration
    }

    /// The URL a daemon gets for `--store`, without the password (it goes by `PUSHGATE_STORE_PASSWORD`),
    /// with `query_timeout` when the configuration's is not the default.
    var urlWithoutPassword: String {
        let timeout: String =
            switch configuration.queryTimeout {
            case PostgresStore.defaultQueryTimeout: ""
            case nil: "&query_timeout=0"
            case let timeout?:
                "&query_timeout=\(Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18)"
            }
        let (user, host, port) = (configuration.username, configuration.host, configuration.port)
        return "postgres://\(user)@\(host):\(port)/\(configuration.database)?schema=\(configuration.schema)" + timeout
    }

    var password: String { configuration.password ?? "" }

    /// Registers `count` devices in `group`, straight through the store (migrating the schema).
    func register(count: Int, in group: String, token: @Sendable (Int) -> String) async throws {
        try await PostgresStore.withStore(configuration: configuration, logger: Self.quietLogger) { store in
            let now = Date()
            for start in stride(from: 0, to: count, by: 5_000) {
                let batch = try (start..<min(start + 5_000, count)).map {
                    Registration(token: try DeviceToken(hex: token($0)), group: group, at: now)
                }
                _ = try await store.register(batch: batch)
            }
        }
    }

    /// Runs SQL with `psql` (installed with the server) and returns its unaligned output.
    func psql(_ sql: String) throws -> String {
        guard let url = Self.url else { throw ExternalTools.ToolError("PUSHGATE_TEST_POSTGRES_URL is not set") }
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: ExternalTools.path(of: "psql") ?? "psql")
        process.arguments = [url, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readToEndRetryingInterrupts()
        process.waitUntilExit()
        let output = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard process.terminationStatus == 0 else { throw ExternalTools.ToolError("psql failed: \(output)") }
        return output
    }

    /// Drops the test's schema (best effort: the server is a throwaway one in CI).
    func drop() {
        _ = try? psql("DROP SCHEMA IF EXISTS \(configuration.schema) CASCADE")
    }

    static var quietLogger: Logger {
        var logger = Logger(label: "test.postgres")
        logger.logLevel = .critical
        return logger
    }
}
