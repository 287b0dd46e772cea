import Foundation
import Logging
import NIOCore
import PostgresNIO
import PushgateCore
import Testing

@testable import PushgatePostgres

#if canImport(Glibc)
import Glibc
#endif

/// A query that PostgreSQL does not answer ends at the store's deadline (`query_timeout`) with a
/// transient store error, its connection closed and replaced; store connections have TCP keepalive.
@Suite("PostgreSQL store: query deadline and TCP keepalive")
struct PostgresQueryDeadlineTests {
    static let token = try! DeviceToken(hex: String(repeating: "ab", count: 32))

    @Test("query_timeout in the URL: seconds, 0 for none, 30 s by default; nonsense is refused")
    func urlParameter() throws {
        let base = "postgres://u@127.0.0.1/db"
        #expect(try PostgresStore.Configuration(url: base).queryTimeout == .seconds(30))
        #expect(try PostgresStore.Configuration(url: base + "?query_timeout=2.5").queryTimeout == .milliseconds(2_500))
        #expect(try PostgresStore.Configuration(url: base + "?query_timeout=0").queryTimeout == nil)
        for bad in ["-1", "0.01", "soon", "", "inf"] {
            #expect(throws: StoreError.self, "\(bad)") {
                try PostgresStore.Configuration(url: base + "?query_timeout=\(bad)")
            }
        }
    }

    @Test(
        "a query blocked past the deadline fails with a transient store error; the store answers again after",
        .enabled(if: TestDatabase.isAvailable, TestDatabase.skipReason)
    )
    func blockedQuery() async throws {
        try await TestDatabase.withFreshSchema { schema in
            var configuration = try TestDatabase.configuration(schema: schema)
            // The deadline bounds every query, the test's own setup and check included: on a starved machine an
            // ordinary query can take longer than a short deadline, so those retry (the blocked one never ends).
            configuration.queryTimeout = .seconds(2)
            try await PostgresStore.withStore(configuration: configuration, logger: TestDatabase.quietLogger) { store in
                _ = try await Self.retryingTimeouts {
                    try await store.register(Registration(token: Self.token, group: "g", at: Date()))
                }
                try await TestDatabase.administer { client in
                    try await client.withConnection { admin in
                        // Another session holds the table: the store's read waits for it, as for a silent server.
                        _ = try await admin.query("BEGIN", logger: TestDatabase.quietLogger)
                        _ = try await admin.query(
                            "LOCK TABLE \(unescaped: schema).device IN ACCESS EXCLUSIVE MODE",
                            logger: TestDatabase.quietLogger
                        )
                        let error = await #expect(throws: StoreError.self) {
                            try await store.device(app: Registration.defaultApp, token: Self.token)
                        }
                        #expect(error?.message.contains("query_timeout") == true, "\(String(describing: error))")
                        #expect(error.map { StoreFailureKind(classifying: $0) } == .transient)
                        _ = try await admin.query("ROLLBACK", logger: TestDatabase.quietLogger)
                    }
                }
                let device = try await Self.retryingTimeouts {
                    try await store.device(app: Registration.defaultApp, token: Self.token)
                }
                #expect(device?.groups == ["g"], "the pool replaced the closed connection")
            }
        }
    }

    /// Runs `operation` again while it ends at the query deadline, up to ten times.
    static func retryingTimeouts<Value>(_ operation: () async throws -> Value) async throws -> Value {
        for _ in 1..<10 {
            do {
                return try await operation()
            } catch let error as StoreError where error.message.contains("query_timeout") {
                continue
            }
        }
        return try await operation()
    }

    @Test(
        "a store connection's socket has keepalive and a bound on unacknowledged data",
        .enabled(if: TestDatabase.isAvailable, TestDatabase.skipReason)
    )
    func keepalive() async throws {
        let configuration = try TestDatabase.configuration(schema: "public")
        let connection = try await PostgresConnection.connect(
            configuration: .init(
                host: configuration.host,
                port: configuration.port,
                username: configuration.username,
                password: configuration.password,
                database: configuration.database,
                tls: .disable
            ),
            id: 1,
            logger: TestDatabase.quietLogger
        )
        let channel = connection.channelByReflection
        #expect(channel != nil, "postgres-nio's channel property is found")
        await ConnectionKeepalive().configure(connection, logger: TestDatabase.quietLogger)
        let options = ConnectionKeepalive.options
        #expect(options.count == 5)
        for (option, value) in options {
            #expect(try await channel?.getOption(option).get() == value, "\(option)")
        }
        try await connection.close()
    }
}
