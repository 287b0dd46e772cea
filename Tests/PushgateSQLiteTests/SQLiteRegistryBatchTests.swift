import Foundation
import PushgateCore
import Testing

@testable import PushgateSQLite

@Suite("SQLite registration batches and benchmark fills")
struct SQLiteRegistryBatchTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    static func registration(_ number: Int, _ group: String = "g") -> Registration {
        Registration(token: try! DeviceToken(hex: String(format: "%064x", number)), group: group, at: start)
    }

    /// Applied in key order, but answered, and new devices numbered (fan-out's order), in the batch's order.
    @Test func aBatchAppliedInKeyOrderAnswersAndNumbersInTheBatchsOrder() async throws {
        try await withTemporaryStore { store in
            _ = try await store.register(Self.registration(7, "other"))
            // Descending tokens, a repeat, and a known device joining a new group.
            let batch = [9, 3, 9, 7, 1].map { Self.registration($0) }
            let results = try await store.register(batch: batch)
            #expect(results == [.created, .created, .alreadyMember, .joinedGroup, .created])
            let page = try await store.devices(app: Registration.defaultApp, group: "g", after: nil, limit: 10)
            #expect(page.devices.map(\.token.hex) == [7, 9, 3, 1].map { String(format: "%064x", $0) })
        }
    }

    @Test func aBatchWrittenWithoutFsyncLeavesTheWriterSynchronousFull() async throws {
        try await withTemporaryStore { store in
            _ = try await store.register(batch: (1...50).map { Self.registration($0) })
            #expect(try await store.pragmas().synchronous == 2)  // FULL: the next acknowledged write is fsync'd
        }
    }

    @Test func aBatchLeavesTheWriterWithA32MiBCacheAndTheStoreCheckpointingTheWALItself() async throws {
        try await withTemporaryStore { store in
            let before = try await store.pragmas()
            #expect(before.walAutocheckpointPages == 0)  // the store checkpoints (WALBound), not SQLite's count
            #expect(before.journalSizeLimit == 64 << 20)
            _ = try await store.register(batch: (1...10).map { Self.registration($0) })
            let after = try await store.pragmas()
            #expect(after.cacheSize == -32_768)  // KiB
            #expect(after.walAutocheckpointPages == 0)
            #expect(after.journalSizeLimit == 64 << 20)
            #expect(after.synchronous == 2)
        }
    }

    @Test func aBatchAsLargeAsTheUDPIngressSendsIsAppliedWholeInAnyArrivalOrder() async throws {
        try await withTemporaryStore { store in
            // The ingress's batch limit is 50,000; this one is larger, and arrives out of token order.
            let batch = Array(1...60_000).shuffled().map { Self.registration($0) }
            let results = try await store.register(batch: batch)
            #expect(results.allSatisfy { $0 == .created })
            let counted = try await store.countMembersForBenchmark(group: "g", afterDevice: 0)
            #expect(counted.count == 60_000)
        }
    }

    @Test func theBenchmarkFillAddsDistinctDevicesThatTheCounterSeesOnce() async throws {
        try await withTemporaryStore { store in
            #expect(try await store.prefillForBenchmark(group: "filled", count: 500, at: Self.start) == 500)
            let first = try await store.countMembersForBenchmark(group: "filled", afterDevice: 0)
            #expect(first.count == 500)
            #expect(try await store.countMembersForBenchmark(group: "filled", afterDevice: first.lastDevice).count == 0)
            #expect(try await store.prefillForBenchmark(group: "filled", count: 200, at: Self.start) == 200)
            let added = try await store.countMembersForBenchmark(group: "filled", afterDevice: first.lastDevice)
            #expect(added.count == 200)
            let page = try await store.devices(app: Registration.defaultApp, group: "filled", after: nil, limit: 1_000)
            #expect(Set(page.devices.map(\.token)).count == 700)
            #expect(try await store.countMembersForBenchmark(group: "nobody", afterDevice: 0).count == 0)
        }
    }
}
