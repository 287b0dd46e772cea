import Foundation
import PostgresNIO
import PushgateCore
import PushgatePostgres
import StoreConformance
import Testing

@Suite("PostgreSQL: a simulated year with retention", .enabled(if: TestDatabase.isAvailable, TestDatabase.skipReason))
struct PostgresSimulatedYearTests {
    /// The year SQLite runs (SQLiteSimulatedYearTests), at a thirteenth of its traffic (2 one-device requests and
    /// a group request a day, a retention pass a day) so that it stays about a minute over a socket on a
    /// loaded machine: once the first retention period is over, the ledger's rows stay within 10 %.
    /// Rows, not bytes: how soon autovacuum makes deleted rows' room reusable depends on its timing, not on
    /// pushgate (the bytes are printed).
    @Test("the ledger is flat after the first retention period")
    func flatAfterTheFirstRetentionPeriod() async throws {
        try await TestDatabase.withFreshSchema { schema in
            try await TestDatabase.administer { client in
                try await PostgresStore.withStore(
                    configuration: try TestDatabase.configuration(schema: schema),
                    logger: TestDatabase.quietLogger
                ) { store in
                    var year = SimulatedYear()
                    year.oneDeviceRequestsPerDay = 2
                    year.groupRequestsPerDay = 1
                    year.passesPerDay = 1
                    let result = try await year.run(store: store, clock: ManualWallClock()) {
                        try await Self.ledgerRows(schema: schema, client: client)
                    }
                    let steady = result.steadySizes(retentionDays: 7)
                    let low = try #require(steady.min())
                    let high = try #require(steady.max())
                    let bytes = try await Self.ledgerBytes(schema: schema, client: client)
                    print(
                        """
                        simulated year (PostgreSQL): \(result.requests) requests, \(result.pruned.requests) pruned in \
                        \(result.pruned.transactions) transactions; ledger rows after day 9: \(low)...\(high); \
                        tables and indexes \(bytes) bytes; retention transactions: mean \(result.meanTransaction), longest \(result.longestTransaction)
                        """
                    )
                    #expect(result.pruned.requests > result.requests * 9 / 10, "all but the last week is pruned")
                    #expect(Double(high) <= Double(low) * 1.1, "flat within 10 %: \(low)...\(high)")
                }
            }
        }
    }

    static let ledgerTables = [
        "request", "request_group", "request_unknown_group", "request_token", "chunk", "retry", "failure",
        "failure_count", "request_removed",
    ]

    static func ledgerRows(schema: String, client: PostgresClient) async throws -> Int64 {
        let sum = ledgerTables.map { "(SELECT COUNT(*) FROM \(schema).\($0))" }.joined(separator: " + ")
        for try await count in try await client.query(PostgresQuery(unsafeSQL: "SELECT \(sum)")).decode(Int64.self) {
            return count
        }
        return 0
    }

    static func ledgerBytes(schema: String, client: PostgresClient) async throws -> Int64 {
        let sum = ledgerTables.map { "pg_total_relation_size('\(schema).\($0)')" }.joined(separator: " + ")
        for try await bytes in try await client.query(PostgresQuery(unsafeSQL: "SELECT (\(sum))::BIGINT")).decode(
            Int64.self
        ) {
            return bytes
        }
        return 0
    }
}
