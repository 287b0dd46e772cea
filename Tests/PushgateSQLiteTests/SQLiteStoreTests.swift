import Foundation
import PushgateCore
import Testing

@testable import PushgateSQLite

@Suite("SQLite store specifics")
struct SQLiteStoreTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    static let owner = InstanceID("test-instance")

    static func token(_ number: Int) -> DeviceToken {
        try! DeviceToken(hex: String(format: "%064x", number))
    }

    static func request(_ name: String, groups: [String]) -> NotificationRequest {
        NotificationRequest(id: try! RequestID(name), groups: groups, payload: Payload.alert("hi"), createdAt: start)
    }

    @Test func opensInWALModeWithFullSynchronousForeignKeysAndABusyTimeout() async throws {
        try await withTemporaryStore { store in
            let pragmas = try await store.pragmas()
            #expect(pragmas.journalMode == "wal")
            #expect(pragmas.synchronous == 2)
            #expect(pragmas.foreignKeys)
            #expect(pragmas.busyTimeoutMilliseconds == 5_000)
        }
        var normal = SQLiteStore.Configuration()
        normal.synchronous = .normal
        normal.busyTimeout = .milliseconds(250)
        try await withTemporaryStore(configuration: normal) { store in
            let pragmas = try await store.pragmas()
            #expect(pragmas.synchronous == 1)
            #expect(pragmas.busyTimeoutMilliseconds == 250)
        }
    }

    /// Each page of fan-out reads a range of the membership primary key in order: no full scan, no sort.
    @Test func fanOutPageQueryRangeScansTheMembershipKeyWithoutSorting() async throws {
        try await withTemporaryStore { store in
            let plan = try await store.fanOutPageQueryPlan()
            #expect(
                plan.contains {
                    $0.contains("SEARCH m USING PRIMARY KEY (group_id=? AND device_id>? AND device_id<?)")
                },
                "\(plan)"
            )
            #expect(plan.contains { $0.contains("SEARCH d USING INTEGER PRIMARY KEY (rowid=?)") }, "\(plan)")
            #expect(!plan.contains { $0.contains("TEMP B-TREE") }, "\(plan)")
        }
    }

    /// What a restart sees: the same file opened again (migrations are not re-applied), the request and
    /// its chunk still there, and the chunk of the previous run claimable at once after `releaseLeases`.
    @Test func reopenedDatabaseResumesWhereThePreviousRunStopped() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "pushgate-reopen-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("pushgate.sqlite").path

        let first = try SQLiteStore(path: path)
        _ = try await first.register(
            batch: (1...10).map { Registration(token: Self.token($0), group: "g", at: Self.start) }
        )
        let id = try await first.enqueue(Self.request("r1", groups: ["g"])).id
        let chunk = try #require(
            try await first.claimChunk(owner: Self.owner, now: Self.start, leaseDuration: .seconds(60), chunkSize: 100)
        )
        let page = try await first.targets(of: chunk, after: chunk.progress, limit: 4)
        _ = try await first.recordProgress(
            ChunkProgress(chunk: chunk, through: page.scannedThrough, accepted: 4),
            owner: Self.owner,
            now: Self.start,
            leaseDuration: .seconds(60)
        )
        try first.close()

        let second = try SQLiteStore(path: path)
        #expect(try await second.report(id)?.accepted == 4)
        #expect(
            try await second.claimChunk(owner: Self.owner, now: Self.start, leaseDuration: .seconds(60), chunkSize: 100)
                == nil,
            "leased until the previous run's lease ends"
        )
        #expect(try await second.releaseLeases(owner: Self.owner, now: Self.start) == 1)
        let resumed = try #require(
            try await second.claimChunk(owner: Self.owner, now: Self.start, leaseDuration: .seconds(60), chunkSize: 100)
        )
        #expect(resumed.id == chunk.id)
        #expect(resumed.progress == page.scannedThrough)
        let rest = try await second.targets(of: resumed, after: resumed.progress, limit: 100)
        #expect(rest.targets.map(\.token) == (5...10).map(Self.token))
        try second.close()
    }

    @Test func closedStoreRefusesWork() async throws {
        try await withTemporaryStore { store in
            try store.close()
            await #expect(throws: StoreError.backend("")) {
                _ = try await store.device(app: "default", token: Self.token(1))
            }
        }
    }

    /// Prints the registration rate of a UDP-sized burst applied in batches (no timing assertion: figures,
    /// not pass/fail). Debug builds are several times slower than release builds.
    @Test func registrationBurstRate() async throws {
        for batchSize in [100_000, 1_000] {
            try await withTemporaryStore { store in
                let total = 100_000
                let registrations = (0..<total).map {
                    Registration(token: Self.token($0), group: "group-\($0 % 4)", at: Self.start)
                }
                let clock = ContinuousClock()
                let elapsed = try await clock.measure {
                    for batch in stride(from: 0, to: total, by: batchSize) {
                        _ = try await store.register(batch: Array(registrations[batch..<min(batch + batchSize, total)]))
                    }
                }
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                print(
                    "registration burst: \(total) new devices in batches of \(batchSize): "
                        + "\(String(format: "%.2f", seconds)) s, \(Int(Double(total) / seconds))/s"
                )
                // Again: all already registered (the idempotent path).
                let again = try await clock.measure {
                    _ = try await store.register(batch: Array(registrations.prefix(batchSize)))
                }
                let againSeconds = Double(again.components.seconds) + Double(again.components.attoseconds) / 1e18
                print(
                    "registration burst: \(batchSize) repeated registrations: \(Int(Double(batchSize) / againSeconds))/s"
                )
                let page = try await store.devices(app: "default", group: "group-0", after: nil, limit: 1)
                #expect(page.devices.count == 1)
            }
        }
    }

    /// Prints the fan-out page rate over 100,000 devices in three overlapping groups, and the cost of the
    /// first and last pages (equal when a page is O(page), not O(remaining)).
    @Test func fanOutPageRate() async throws {
        try await withTemporaryStore { store in
            let total = 100_000
            var registrations = [Registration]()
            for number in 0..<total {
                registrations.append(Registration(token: Self.token(number), group: "all", at: Self.start))
                if number % 2 == 0 {
                    registrations.append(Registration(token: Self.token(number), group: "even", at: Self.start))
                }
                if number % 3 == 0 {
                    registrations.append(Registration(token: Self.token(number), group: "third", at: Self.start))
                }
            }
            _ = try await store.register(batch: registrations)
            let clock = ContinuousClock()
            var enqueueResult: EnqueueResult?
            let enqueueTime = try await clock.measure {
                enqueueResult = try await store.enqueue(Self.request("big", groups: ["all", "even", "third"]))
            }
            #expect(enqueueResult?.targetCount == total)
            let pageSize = 1_000
            var pageTimes = [Duration]()
            var sent = 0
            let total_ = try await clock.measure {
                while let chunk = try await store.claimChunk(
                    owner: Self.owner,
                    now: Self.start,
                    leaseDuration: .seconds(60),
                    chunkSize: 10_000
                ) {
                    var cursor = chunk.progress
                    while true {
                        var page: TargetPage!
                        let took = try await clock.measure {
                            page = try await store.targets(of: chunk, after: cursor, limit: pageSize)
                        }
                        pageTimes.append(took)
                        sent += page.targets.count
                        _ = try await store.recordProgress(
                            ChunkProgress(
                                chunk: chunk,
                                through: page.scannedThrough,
                                accepted: page.targets.count,
                                completesChunk: page.isEnd
                            ),
                            owner: Self.owner,
                            now: Self.start,
                            leaseDuration: .seconds(60)
                        )
                        cursor = page.scannedThrough
                        if page.isEnd { break }
                    }
                }
            }
            #expect(sent == total)
            func ms(_ duration: Duration) -> Double {
                Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
            }
            let pageMs = pageTimes.map(ms)
            let head = pageMs.prefix(10).reduce(0, +) / 10
            let tail = pageMs.suffix(10).reduce(0, +) / 10
            print(
                "fan-out: enqueue (count of \(total) distinct targets over 3 groups) \(String(format: "%.1f", ms(enqueueTime))) ms; "
                    + "\(pageTimes.count) pages of \(pageSize) read+recorded in \(String(format: "%.2f", ms(total_) / 1000)) s "
                    + "= \(Int(Double(total) / (ms(total_) / 1000))) targets/s; "
                    + "page read alone \(String(format: "%.2f", pageMs.reduce(0, +) / Double(pageMs.count))) ms avg "
                    + "(first 10 \(String(format: "%.2f", head)) ms, last 10 \(String(format: "%.2f", tail)) ms)"
            )
            #expect(try await store.report(enqueueResult!.id)?.state == .done)
        }
    }
}
