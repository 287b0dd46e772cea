import Foundation
import PushgateCore
import PushgatePostgres
import StoreConformance
import Testing

/// What one-device requests cost in PostgreSQL statements (each a round trip, transaction control
/// included), phase by phase, as the dispatcher drives the store: a batch stored by group commit with
/// its claim, every chunk's completing record in one batch, then the "done" lines' reports. The bounds are
/// per request plus a few per batch; the figures printed are the ones docs/benchmarks.md quotes.
@Suite(
    "PostgreSQL store: statements per one-device request",
    .enabled(if: TestDatabase.isAvailable, TestDatabase.skipReason)
)
struct PostgresStatementCountTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    static let owner = InstanceID("counted")

    static func token(_ number: Int) -> DeviceToken {
        try! DeviceToken(hex: String(format: "%064x", 0xC0_0000 + number))
    }

    typealias Statements = RecordedStatements

    /// A migrated store in a fresh schema whose statements `body` reads from the ``Statements`` it gets.
    static func withCountedStore(_ body: @Sendable (PostgresStore, Statements) async throws -> Void) async throws {
        let statements = Statements()
        try await TestDatabase.withFreshSchema { schema in
            var configuration = try TestDatabase.configuration(schema: schema)
            configuration.statementObserver = { statements.record($0) }
            try await PostgresStore.withStore(configuration: configuration, logger: TestDatabase.quietLogger) {
                store in
                try await body(store, statements)
            }
        }
    }

    @Test(
        "a batch of one-device requests: intake with its claim, outcomes with completion, reports",
        arguments: [1, 64]
    )
    func oneDeviceRequests(batch: Int) async throws {
        try await Self.withCountedStore { store, statements in
            let phases = try await OneDeviceRequestPhases.run(
                store,
                statements: statements,
                batch: batch,
                owner: Self.owner,
                start: Self.start
            )
            let (intake, outcomes, reading) = (phases.intake, phases.outcomes, phases.reading)
            #expect(
                !intake.contains { $0.uppercased().hasPrefix("SAVEPOINT") },
                "requests without an idempotency key are stored without savepoints"
            )
            #expect(phases.stored.results.allSatisfy { (try? $0.get())?.targetCount == 1 })
            #expect(phases.claimed.count == batch, "every request's one chunk claimed")
            #expect(phases.claimed.allSatisfy { $0.firstPage.targets.count == 1 }, "each with its one device")
            #expect(phases.recorded.allSatisfy { (try? $0.get()) == .chunkCompleted })
            #expect(phases.reports.map(\.id) == phases.requests.map(\.id))
            #expect(phases.reports.allSatisfy { $0.state == .done && $0.accepted == 1 })
            #expect(
                zip(phases.reports, phases.claimed).allSatisfy { $0.lastAPNsID == "apns-\($1.chunk.id)" },
                "each report names its chunk's apns-id"
            )

            let perRequest = { OneDeviceRequestPhases.perRequest($0, batch: batch) }
            print(
                "PostgreSQL statements per one-device request (batch of \(batch)): "
                    + "intake and claim \(perRequest(intake)), outcome and completion \(perRequest(outcomes)), "
                    + "report \(perRequest(reading))"
            )
            // Main before this change (5ea9fe4), batch of 64: 20.1, 8.0 and 7.0 a request; alone: 27, 10 and 7.
            #expect(intake.count <= 6 * batch + 14, "intake and claim: at most 6 a request and 14 a batch")
            #expect(outcomes.count <= 4 * batch + 2, "outcome and completion: at most 4 a request and 2 a batch")
            #expect(reading.count <= 1, "the reports of a batch: one statement in all")
            var byStatement = [String: Int]()
            for sql in intake + outcomes + reading {
                let line = sql.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
                byStatement[String(line.joined(separator: " ").prefix(100)), default: 0] += 1
            }
            for (sql, count) in byStatement.sorted(by: { $0.value > $1.value }) { print("  \(count)\t\(sql)") }
        }
    }
    @Test("the group commit's claim notifies other instances only of requests it leaves with targets to cut")
    func claimWithTheBatchNotifiesOnlyForUncutWork() async throws {
        try await Self.withCountedStore { store, statements in
            _ = try await store.register(
                batch: [Registration(token: Self.token(0), group: "one", at: Self.start)]
                    + (1...3).map { Registration(token: Self.token($0), group: "three", at: Self.start) }
            )
            let lease = LeaseWindow(owner: Self.owner, now: Self.start, duration: .seconds(60))
            func request(_ id: String, to group: String) -> NotificationRequest {
                NotificationRequest(
                    id: try! RequestID(id),
                    groups: [group],
                    payload: Payload.alert("hi"),
                    createdAt: Self.start
                )
            }
            func notifies(_ sql: [String]) -> Bool { sql.contains { $0.contains("pg_notify") } }

            _ = statements.take()
            let single = try await store.enqueue(
                batch: [request("single", to: "one")],
                claiming: BatchClaim(lease: lease, chunkSize: 100, pageLimit: 100, maximumChunks: 8)
            )
            #expect(single.claimed.map(\.chunk.requestID.value) == ["single"], "its one chunk claimed")
            #expect(!notifies(statements.take()), "cut through by the claim: nothing for other instances")

            let larger = try await store.enqueue(
                batch: [request("larger", to: "three")],
                claiming: BatchClaim(lease: lease, chunkSize: 1, pageLimit: 100, maximumChunks: 8)
            )
            #expect(larger.claimed.count == 1, "one chunk of a request claimed at a time")
            #expect(notifies(statements.take()), "two devices left to cut: other instances are told")
        }
    }
}
