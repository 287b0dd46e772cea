import APNsHTTP2
import Foundation
import PushTransport
import PushgateCore
import PushgateDispatch
import StoreConformance
import Synchronization
import Testing

@testable import PushgateSQLite

/// Group commit: who writes next (a pure transcript), and through the dispatcher on a real SQLite file,
/// that each caller is answered after the commit that holds its request, with its own answer.
/// The time limit is a safety net, not a budget: CI runs every suite at once on two cores.
@Suite("Dispatcher: group commit of requests and progress", .timeLimit(.minutes(10)))
struct GroupCommitTests {
    @Test("an arrival on an idle writer leads alone; arrivals during a write wait and the oldest leads the next batch")
    func queueTranscript() {
        var queue = GroupCommitQueue<String>(maximumBatch: 3)
        #expect(queue.arrived("a") == .lead)
        #expect(queue.arrived("b") == .wait)
        #expect(queue.arrived("c") == .wait)
        #expect(queue.arrived("d") == .wait)
        #expect(queue.arrived("e") == .wait)
        guard case .lead(let leader, let followers) = queue.written() else {
            Issue.record("b, c and d wait: b leads them")
            return
        }
        #expect(leader == "b")
        #expect(followers == ["c", "d"], "at most three in a batch, the leader included")
        #expect(queue.isWriting)
        guard case .lead(let next, let nextFollowers) = queue.written() else {
            Issue.record("e waits: it leads")
            return
        }
        #expect(next == "e")
        #expect(nextFollowers.isEmpty)
        guard case .idle = queue.written() else {
            Issue.record("nothing waits: the writer is free")
            return
        }
        #expect(!queue.isWriting)
        #expect(queue.arrived("f") == .lead, "an idle writer: the next arrival writes at once")
    }

    static func token(_ number: Int) -> DeviceToken {
        try! DeviceToken(hex: String(format: "%064x", 0x6C_0000 + number))
    }

    static func request(_ number: Int, group: String? = nil) -> NotificationRequest {
        NotificationRequest(
            id: try! RequestID("r\(number)"),
            groups: [group ?? "u\(number % 50)"],
            payload: Payload.alert("hi"),
            createdAt: Date()
        )
    }

    /// A dispatcher on a fresh SQLite file with 50 devices, each alone in its group `u0` ... `u49`,
    /// answering every notification at once.
    static func withDispatcher(
        _ body: (Dispatcher, SQLiteStore, RecordingAPNsTransport) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteStore(path: directory.path("group-commit.db"))
        defer { try? store.close() }
        _ = try await store.register(
            batch: (0..<50).map { Registration(token: token($0), group: "u\($0)", at: Date()) }
        )
        let transport = RecordingAPNsTransport()
        var configuration = Dispatcher.Configuration(instanceID: InstanceID("group-commit"))
        configuration.shutdownGracePeriod = .milliseconds(100)
        let dispatcher = Dispatcher(
            store: store,
            routes: [
                Registration.defaultApp: DeliveryRoute(transport: transport, topic: try Topic("com.example.group"))
            ],
            configuration: configuration,
            logger: TestLogger.make("dispatch")
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await dispatcher.run() }
            defer {
                group.cancelAll()
                dispatcher.wakeUp()
            }
            try await body(dispatcher, store, transport)
        }
    }

    @Test("progress records and requests of one group commit: one store transaction, each answered as its own")
    func recordsAndRequestsShareATransaction() async throws {
        let statements = RecordedStatements()
        var storeConfiguration = SQLiteStore.Configuration()
        storeConfiguration.statementObserver = { statements.record($0) }
        let directory = try TemporaryDirectory()
        let store = try SQLiteStore(path: directory.path("shared-commit.db"), configuration: storeConfiguration)
        defer { try? store.close() }
        _ = try await store.register(
            batch: (0..<4).map { Registration(token: Self.token($0), group: "u\($0)", at: Date()) }
        )
        let instance = InstanceID("group-commit")
        let dispatcher = Dispatcher(
            store: store,
            routes: [
                Registration.defaultApp: DeliveryRoute(
                    transport: RecordingAPNsTransport(),
                    topic: try Topic("com.example.group")
                )
            ],
            configuration: Dispatcher.Configuration(instanceID: instance),
            logger: TestLogger.make("dispatch")
        )
        let lease = LeaseWindow(owner: instance, now: Date(), duration: .seconds(60))
        let claimed = try await store.enqueue(
            batch: [Self.request(0), Self.request(1)],
            claiming: BatchClaim(lease: lease, chunkSize: 100, pageLimit: 100, maximumChunks: 2)
        ).claimed
        #expect(claimed.count == 2)
        let records = claimed.map { work in
            LedgerItem.progress(
                ProgressRecord(
                    ChunkProgress(
                        chunk: work.chunk,
                        through: work.firstPage.scannedThrough,
                        accepted: 1,
                        completesChunk: true
                    ),
                    renewing: lease
                )
            )
        }
        _ = statements.take()
        // Interleaved as arrivals would be: a record, a request, a refused request, the other record.
        let answers = await dispatcher.writeLedger([
            records[0], .request(Self.request(2)), .request(Self.request(3, group: "missing")), records[1],
        ])
        let written = statements.take()
        #expect(written.filter { $0.uppercased().hasPrefix("BEGIN") }.count == 1, "one transaction: \(written)")
        #expect(written.filter { $0.uppercased().hasPrefix("COMMIT") }.count == 1)
        #expect(answers.count == 4)
        guard answers.count == 4, case .progress(let first) = answers[0], case .request(let stored) = answers[1],
            case .request(let refused) = answers[2], case .progress(let last) = answers[3]
        else {
            Issue.record("each item answered in its place and of its kind: \(answers)")
            return
        }
        #expect((try? first.get()) == .chunkCompleted)
        #expect((try? last.get()) == .chunkCompleted)
        #expect((try? stored.get())?.targetCount == 1, "r2 is stored")
        #expect((refused.failure as? StoreError)?.code == .unknownGroup, "r3's own refusal")
        let reports = try await store.reports([try RequestID("r0"), try RequestID("r1"), try RequestID("r2")])
        #expect(reports.map(\.state) == [.done, .done, .queued], "r0 and r1 finished by their records; r2 waits")

        // A failure of the shared transaction (a request's insert aborted by SQLite) fails both halves: the
        // record is answered with the store's error and nothing of it is written.
        let more = try await store.enqueue(
            batch: [Self.request(10, group: "u0")],
            claiming: BatchClaim(lease: lease, chunkSize: 100, pageLimit: 100, maximumChunks: 1)
        ).claimed
        let pending = try #require(more.first)
        try await store.write { db in
            try db.execute(
                sql: """
                    CREATE TRIGGER fail_r11 BEFORE INSERT ON request WHEN NEW.id = 'r11'
                    BEGIN SELECT RAISE(ABORT, 'injected failure'); END
                    """
            )
        }
        let failed = await dispatcher.writeLedger([
            .progress(
                ProgressRecord(
                    ChunkProgress(
                        chunk: pending.chunk,
                        through: pending.firstPage.scannedThrough,
                        accepted: 1,
                        completesChunk: true
                    ),
                    renewing: lease
                )
            ),
            .request(Self.request(11, group: "u1")),
        ])
        guard failed.count == 2, case .progress(let record) = failed[0], case .request(let request) = failed[1] else {
            Issue.record("both items answered: \(failed)")
            return
        }
        #expect((record.failure as StoreError?)?.code == .backend, "the record fails with the transaction")
        #expect((request.failure as? StoreError)?.code == .backend, "and so does the request")
        #expect(try await store.report(try RequestID("r10"))?.state != .done, "nothing of the record was written")
        #expect(try await store.request(try RequestID("r11")) == nil, "r11 is not stored")
    }

    @Test("concurrent submissions share commits; refused ones get their own error and cost the others nothing")
    func refusalsInABatchAreTheirOwn() async throws {
        try await Self.withDispatcher { dispatcher, store, transport in
            let answers = await withTaskGroup(of: (Int, Result<EnqueueResult, any Error>).self) { group in
                for number in 0..<200 {
                    // Every tenth names a group the app does not have; r5 is submitted twice.
                    let request = Self.request(number == 7 ? 5 : number, group: number % 10 == 3 ? "missing" : nil)
                    group.addTask { (number, await outcome { try await dispatcher.submit(request) }) }
                }
                return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            var stored = 0
            for number in 0..<200 {
                let answer = try #require(answers[number])
                if number % 10 == 3 {
                    #expect((answer.failure as? StoreError)?.code == .unknownGroup, "r\(number): its own refusal")
                } else if number == 5 || number == 7 {
                    continue
                } else {
                    #expect(try answer.get().targetCount == 1, "r\(number) is stored")
                    stored += 1
                }
            }
            let duplicates = [answers[5], answers[7]].compactMap { ($0?.failure as? StoreError)?.code }
            #expect(duplicates == [.duplicateRequestID], "one of the two r5 is stored, the other refused")
            let sent = stored + 1
            try await eventually("every stored request sent") { transport.sent.count == sent }
            let storedIDs = try (0..<200).filter { $0 % 10 != 3 && $0 != 7 }.map { try RequestID("r\($0)") }
            // One read of all reports a poll, not one wait per request: under the full suite's load on two cores
            // 180 waits in a row took longer than the time limit.
            try await eventually("every stored request done") {
                let reports = try await store.reports(storedIDs)
                return reports.count == storedIDs.count && reports.allSatisfy { $0.state == .done }
            }
        }
    }

    @Test(
        "a batch whose transaction fails mid-way: nobody is answered success for a request not stored, nothing stored is answered failure"
    )
    func failedBatchAnswersEveryoneTruthfully() async throws {
        try await Self.withDispatcher { dispatcher, store, _ in
            // A real SQLite failure inside the batch's transaction, after earlier requests of the batch were
            // inserted: the trigger aborts the insert of r13, which rolls back the whole transaction.
            try await store.write { db in
                try db.execute(
                    sql: """
                        CREATE TRIGGER fail_r13 BEFORE INSERT ON request WHEN NEW.id = 'r13'
                        BEGIN SELECT RAISE(ABORT, 'injected failure'); END
                        """
                )
            }
            let answers = await withTaskGroup(of: (Int, Result<EnqueueResult, any Error>).self) { group in
                for number in 0..<100 {
                    let request = Self.request(number)
                    group.addTask { (number, await outcome { try await dispatcher.submit(request) }) }
                }
                return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            var failed = 0
            for number in 0..<100 {
                let answer = try #require(answers[number])
                let isStored = try await store.request(try RequestID("r\(number)")) != nil
                switch answer {
                case .success: #expect(isStored, "r\(number) was answered stored: it is stored")
                case .failure(let error):
                    #expect(!isStored, "r\(number) was answered \(error): it is not stored")
                    #expect((error as? StoreError)?.code == .backend, "r\(number): the store's failure")
                    failed += 1
                }
            }
            #expect(answers[13]?.failure != nil, "r13's batch failed")
            #expect(failed >= 1)
        }
    }
}

extension Result {
    fileprivate var failure: Failure? {
        guard case .failure(let error) = self else { return nil }
        return error
    }
}

private func outcome<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
    do { return .success(try await body()) } catch { return .failure(error) }
}
