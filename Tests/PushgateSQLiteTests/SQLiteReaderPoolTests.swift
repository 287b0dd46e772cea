import Foundation
import Testing

@testable import PushgateSQLite

#if os(Linux)
/// The store opens its whole reader pool at the start, so that a long-running gateway's descriptors do not
/// step up hours later when a busier moment first needs one more reader (the one-hour soak of 2026-11-27).
@Suite("SQLite reader pool")
struct SQLiteReaderPoolTests {
    /// This process's descriptors open on the database file itself (not its WAL or SHM), from `/proc/self/fd`:
    /// one per SQLite connection.
    static func descriptors(on path: String) -> Int {
        let real = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.filter { entry in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(entry)")) == real
        }.count
    }

    @Test func everyReaderIsOpenBeforeTheFirstReadAndNoneOpensLater() async throws {
        var configuration = SQLiteStore.Configuration()
        configuration.maximumReaderCount = 3
        configuration.opensEveryReaderAtStart = true
        try await withTemporaryStore(configuration: configuration) { store in
            // The writer and the three readers, before anything was read.
            #expect(Self.descriptors(on: store.path) == 1 + 3)
            // Reads at once, more than there are readers: the pool has nothing left to open.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<20 {
                    group.addTask { _ = try await store.fanOutPageQueryPlan() }
                }
                try await group.waitForAll()
            }
            #expect(Self.descriptors(on: store.path) == 1 + 3)
            try store.close()
            #expect(Self.descriptors(on: store.path) == 0)
        }
    }

    @Test func byDefaultReadersOpenAsReadsNeedThem() async throws {
        var configuration = SQLiteStore.Configuration()
        configuration.maximumReaderCount = 3
        try await withTemporaryStore(configuration: configuration) { store in
            #expect(Self.descriptors(on: store.path) == 1, "the writer only")
            try store.close()
        }
    }
}
#endif
