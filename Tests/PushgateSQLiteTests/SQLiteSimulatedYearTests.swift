import Foundation
import PushgateCore
import StoreConformance
import Testing

@testable import PushgateSQLite

@Suite("SQLite: a simulated year with retention")
struct SQLiteSimulatedYearTests {
    /// 365 simulated days of 40 requests a day (32 to one device, 8 to a group of 20), retention a week,
    /// a retention pass every six simulated hours: once the first week is over, the pages in use and the
    /// file stay within 10 % of each other, day after day. Without retention they grow every day.
    @Test("the database is flat after the first retention period")
    func flatAfterTheFirstRetentionPeriod() async throws {
        var configuration = SQLiteStore.Configuration()
        // Durability is not under test here; an fsync per commit would make the year take minutes.
        configuration.synchronous = .normal
        try await withStoreInMemoryFileSystem(configuration: configuration) { store in
            var year = SimulatedYear()
            year.oneDeviceRequestsPerDay = 32
            year.groupRequestsPerDay = 8
            let start = ContinuousClock.now
            let result = try await year.run(store: store, clock: ManualWallClock()) {
                try await store.pageUse().usedBytes
            }
            let elapsed = ContinuousClock.now - start
            let steady = result.steadySizes(retentionDays: 7)
            let low = try #require(steady.min())
            let high = try #require(steady.max())
            let file = try await store.pageUse().fileBytes
            print(
                """
                simulated year (SQLite): \(result.requests) requests, \(result.pruned.requests) pruned in \
                \(result.pruned.transactions) transactions (\(result.pruned.rows) rows); bytes in use after \
                day 9: \(low)...\(high); file \(file) bytes; bytes in use on day 7: \(result.sizes[6]); \
                retention transactions: mean \(result.meanTransaction), longest \(result.longestTransaction), longest pass \(result.longestPass); \
                took \(elapsed)
                """
            )
            #expect(result.pruned.requests > result.requests * 9 / 10, "all but the last week is pruned")
            #expect(Double(high) <= Double(low) * 1.1, "flat within 10 %: \(low)...\(high)")
            #expect(Double(file) <= Double(high) * 1.1 + 64 * 1024, "the file keeps no more than it uses: \(file)")
        }
    }

    /// A store on a file in /dev/shm when there is one (a tmpfs: the year's checkpoints cost no fsync, and the
    /// file is a real SQLite file all the same), else in the temporary folder.
    func withStoreInMemoryFileSystem<R>(
        configuration: SQLiteStore.Configuration,
        _ body: (SQLiteStore) async throws -> R
    ) async throws -> R {
        let shm = URL(fileURLWithPath: "/dev/shm")
        let base = FileManager.default.isWritableFile(atPath: shm.path) ? shm : FileManager.default.temporaryDirectory
        let folder = base.appendingPathComponent("pushgate-year-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try SQLiteStore(
            path: folder.appendingPathComponent("pushgate.sqlite").path,
            configuration: configuration
        )
        defer { try? store.close() }
        return try await body(store)
    }
}
