import Foundation
import PushgateCore
import PushgateSQLite
import Testing

/// The SQLite store on a volume of its own (a tmpfs of a few MiB): the WAL stays bounded, a full volume
/// refuses writes with a clear error and serves again once it has room, and the files as a crash would
/// leave them hold every commit.
@Suite("SQLite store on a small volume", .serialized, .timeLimit(.minutes(5)))
struct SmallVolumeStoreTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    /// Tokens spread over the key space, as real ones are.
    static func token(_ index: Int) -> DeviceToken {
        try! DeviceToken(hex: String(format: "%064x", UInt64(index + 1) &* 0x9E37_79B9_7F4A_7C15))
    }

    static func batch(_ range: Range<Int>, group: String = "g") -> [Registration] {
        range.map { Registration(token: token($0), group: group, at: start) }
    }

    static func members(_ store: SQLiteStore, group: String = "g") async throws -> Int {
        try await store.countMembersForBenchmark(group: group, afterDevice: 0).count
    }

    static let skipped = "mounting a tmpfs is not permitted here (needs root): skipped"

    @Test(
        "24 MiB volume: 60,000 registrations in batches of 500 are all applied, the WAL never passes a quarter of the room"
    )
    func boundedWAL() async throws {
        // With the former 1 GiB checkpoint interval the WAL filled this volume after about 45,000
        // (8 MiB held 15,000): "database or disk is full".
        let ran = try await withSmallVolume(megabytes: 24) { volume in
            let store = try SQLiteStore(path: volume.path("store.db"))
            var largestWAL: Int64 = 0
            for start in stride(from: 0, to: 60_000, by: 500) {
                _ = try await store.register(batch: Self.batch(start..<start + 500))
                largestWAL = max(largestWAL, volume.size("store.db-wal"))
            }
            #expect(try await Self.members(store) == 60_000)
            // A quarter of 24 MiB, plus one batch's frames written before the checkpoint after it.
            #expect(largestWAL <= 7 << 20, "largest WAL: \(largestWAL) bytes")
            #expect(largestWAL > 0)
            // Idle: the second round finds the WAL unchanged and truncates it.
            _ = await store.maintain()
            let idle = await store.maintain()
            #expect(idle.walBytes == 0)
            #expect(idle.databaseBytes == volume.size("store.db"))
            try store.close()
        }
        if !ran { print(Self.skipped) }
    }

    @Test("a volume filled by another file refuses writes with a clear error, and serves again once the file is gone")
    func filledByAnotherFile() async throws {
        let ran = try await withSmallVolume(megabytes: 16) { volume in
            var configuration = SQLiteStore.Configuration()
            configuration.minimumFreeBytes = 2 << 20
            let store = try SQLiteStore(path: volume.path("store.db"), configuration: configuration)
            _ = try await store.register(batch: Self.batch(0..<1_000))
            _ = await store.maintain()
            #expect(await store.maintain().walBytes == 0)
            #expect(!store.diskUse().isLow)

            try volume.fill("filler", leaving: 0)
            #expect(store.diskUse().isLow)
            let refused = await #expect(throws: StoreError.self) {
                _ = try await store.register(batch: Self.batch(1_000..<3_000))
            }
            #expect(
                refused?.message.contains("the database's volume is full") == true,
                "\(String(describing: refused))"
            )
            await #expect(throws: StoreError.self) {
                _ = try await store.enqueue(
                    NotificationRequest(
                        id: try RequestID("full"),
                        groups: ["g"],
                        payload: Payload.alert("x"),
                        createdAt: Self.start
                    )
                )
            }
            #expect(try await Self.members(store) == 1_000, "the refused batch changed nothing")

            try FileManager.default.removeItem(atPath: volume.path("filler"))
            #expect(!store.diskUse().isLow)
            // The same store, not reopened.
            _ = try await store.register(batch: Self.batch(1_000..<3_000))
            let stored = try await store.enqueue(
                NotificationRequest(
                    id: try RequestID("roomy"),
                    groups: ["g"],
                    payload: Payload.alert("x"),
                    createdAt: Self.start
                )
            )
            #expect(stored.targetCount == 3_000)
            try store.close()
        }
        if !ran { print(Self.skipped) }
    }

    @Test("the files as a crash leaves them, between checkpoints of the bounded WAL, hold every committed batch")
    func crashKeepsCommits() async throws {
        let ran = try await withSmallVolume(megabytes: 16) { volume in
            var configuration = SQLiteStore.Configuration()
            configuration.synchronous = .full
            let store = try SQLiteStore(path: volume.path("store.db"), configuration: configuration)
            var checkpointsSeen = 0
            var previousDatabase: Int64 = 0
            var copies = 0
            for start in stride(from: 0, to: 30_000, by: 500) {
                _ = try await store.register(batch: Self.batch(start..<start + 500))
                // The database file grows only when a checkpoint copies new pages into it.
                let database = volume.size("store.db")
                if database > previousDatabase { checkpointsSeen += 1 }
                previousDatabase = database
                guard start % 5_000 == 4_500 else { continue }
                // What a SIGKILL here would leave: the database and its WAL as they are, never closed, never
                // checkpointed by a clean close. Copied elsewhere and opened there.
                let crash = try TemporaryDirectory()
                for suffix in ["", "-wal"]
                where FileManager.default.fileExists(atPath: volume.path("store.db" + suffix)) {
                    try FileManager.default.copyItem(
                        atPath: volume.path("store.db" + suffix),
                        toPath: crash.path("crashed.db" + suffix)
                    )
                }
                let reopened = try SQLiteStore(path: crash.path("crashed.db"))
                #expect(try await Self.members(reopened) == start + 500, "after \(start + 500) committed")
                try reopened.close()
                copies += 1
            }
            #expect(copies == 6)
            #expect(checkpointsSeen >= 2, "the bound checkpointed the WAL between the copies")
            try store.close()
        }
        if !ran { print(Self.skipped) }
    }
}
