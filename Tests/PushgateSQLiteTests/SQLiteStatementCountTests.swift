import Foundation
import PushgateCore
import StoreConformance
import Testing

@testable import PushgateSQLite

/// What one-device requests cost in SQL statements, phase by phase, as the dispatcher drives the store: a
/// batch stored by group commit with its claim, then every chunk's completing record in one batch, then
/// the "done" lines' reports. The bounds are per request and hold for a batch of any size (a statement
/// per batch is shared); the figures printed are the ones docs/benchmarks.md quotes.
@Suite("SQLite store: statements per one-device request")
struct SQLiteStatementCountTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    static let owner = InstanceID("counted")
    static let batch = 64

    static func token(_ number: Int) -> DeviceToken {
        try! DeviceToken(hex: String(format: "%064x", 0xC0_0000 + number))
    }

    typealias Statements = RecordedStatements

    /// Statements of the phase, without transaction control (BEGIN, COMMIT, savepoints, PRAGMAs).
    static func work(_ statements: [String]) -> [String] {
        statements.filter { sql in
            let head = sql.trimmingCharacters(in: .whitespacesAndNewlines).uppercased()
            return !["BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "PRAGMA"].contains { head.hasPrefix($0) }
        }
    }

    @Test("a batch of one-device requests: intake with its claim, outcomes with completion, reports")
    func oneDeviceRequests() async throws {
        let statements = Statements()
        var configuration = SQLiteStore.Configuration()
        configuration.statementObserver = { statements.record($0) }
        try await withTemporaryStore(configuration: configuration) { store in
            let phases = try await OneDeviceRequestPhases.run(
                store,
                statements: statements,
                batch: Self.batch,
                owner: Self.owner,
                start: Self.start
            )
            let intake = Self.work(phases.intake)
            let (outcomes, reading) = (Self.work(phases.outcomes), Self.work(phases.reading))
            #expect(
                !phases.intake.contains { $0.uppercased().hasPrefix("SAVEPOINT") },
                "requests without an idempotency key are stored without savepoints"
            )
            #expect(phases.stored.results.allSatisfy { (try? $0.get())?.targetCount == 1 })
            #expect(phases.stored.claimed.count == Self.batch, "every request's one chunk claimed with the enqueue")
            #expect(phases.recorded.allSatisfy { (try? $0.get()) == .chunkCompleted })
            #expect(phases.reports.count == Self.batch)
            #expect(phases.reports.allSatisfy { $0.state == .done && $0.accepted == 1 })

            let perRequest = { OneDeviceRequestPhases.perRequest($0, batch: Self.batch) }
            print(
                "statements per one-device request (batch of \(Self.batch)): "
                    + "intake and claim \(perRequest(intake)), outcome and completion \(perRequest(outcomes)), "
                    + "report \(perRequest(reading))"
            )
            // Main before group commit: 17.0 (and two savepoint statements), 6.0 and 4.0; before the batch's
            // registry reads, request_group rows and outcome reads were one statement for the batch: 9.06 and 4.0.
            // 5.1 before the claim took a request's first cut from the enqueue's membership count.
            // 4.1 before the claimed chunks' first pages were read in one statement.
            #expect(intake.count <= 3 * Self.batch + 12, "intake and claim: at most 3 a request, a few a batch")
            #expect(
                intake.filter { $0.contains("FROM membership m JOIN device d") }.isEmpty,
                "the first pages of the batch's one-device chunks are one read, not one a chunk"
            )
            #expect(
                !intake.contains { $0.contains("SELECT device_id FROM membership") },
                "a one-device request's cut comes from the membership count its enqueue read, not a scan"
            )
            // 2.03 before the chunks' progress updates and the requests' completions were one statement each
            // for the batch.
            #expect(outcomes.count <= 8, "outcome and completion: a few statements for the batch")
            #expect(
                outcomes.filter { $0.hasPrefix("UPDATE chunk SET progress") }.count <= 1,
                "the batch's chunks' progress: one statement"
            )
            #expect(reading.count <= 8, "the reports of a batch: a few statements in all")
            var byStatement = [String: Int]()
            for sql in intake + outcomes + reading { byStatement[String(sql.prefix(90)), default: 0] += 1 }
            for (sql, count) in byStatement.sorted(by: { $0.value > $1.value }) { print("  \(count)\t\(sql)") }
        }
    }

    @Test("one batch's outcomes and the next batch's requests: one transaction, as many statements as apart")
    func outcomesWithTheNextIntake() async throws {
        let statements = Statements()
        var configuration = SQLiteStore.Configuration()
        configuration.statementObserver = { statements.record($0) }
        try await withTemporaryStore(configuration: configuration) { store in
            _ = try await store.register(
                batch: (1...2 * Self.batch).map {
                    Registration(token: Self.token($0), group: "user\($0)", at: Self.start)
                }
            )
            let requests = (1...2 * Self.batch).map { index in
                NotificationRequest(
                    id: try! RequestID("r\(index)"),
                    groups: ["user\(index)"],
                    payload: Payload.alert("hi"),
                    createdAt: Self.start
                )
            }
            let lease = LeaseWindow(owner: Self.owner, now: Self.start, duration: .seconds(60))
            let claim = BatchClaim(lease: lease, chunkSize: 1_000, pageLimit: 500, maximumChunks: Self.batch)
            let first = try await store.enqueue(batch: Array(requests.prefix(Self.batch)), claiming: claim)
            let records = first.claimed.map { work in
                ProgressRecord(
                    ChunkProgress(
                        chunk: work.chunk,
                        through: work.firstPage.scannedThrough,
                        accepted: work.firstPage.targets.count,
                        completesChunk: true
                    ),
                    renewing: lease
                )
            }
            _ = statements.take()
            let written = await store.write(
                LedgerWrite(requests: Array(requests.suffix(Self.batch)), claiming: claim, records: records)
            )
            let all = statements.take()
            #expect(written.recorded.allSatisfy { (try? $0.get()) == .chunkCompleted })
            let second = try written.enqueued.get()
            #expect(second.results.allSatisfy { (try? $0.get())?.targetCount == 1 })
            #expect(second.claimed.count == Self.batch, "the second batch's chunks claimed with it")
            let begins = all.filter { $0.uppercased().hasPrefix("BEGIN") }
            let commits = all.filter { $0.uppercased().hasPrefix("COMMIT") }
            #expect(begins.count == 1 && commits.count == 1, "one transaction: \(begins) \(commits)")
            #expect(Self.work(all).count <= 7 * Self.batch + 10, "as many statements as the two phases apart")
            let reports = try await store.reports(requests.map(\.id))
            #expect(reports.prefix(Self.batch).allSatisfy { $0.state == .done && $0.accepted == 1 })
            #expect(reports.suffix(Self.batch).allSatisfy { $0.state != .done })
        }
    }
}
