import Foundation
import PushgateCore
import Synchronization
import Testing

@testable import PushgateSQLite

/// A claim is written with `synchronous = NORMAL` and FULL is put back afterwards. If that fails, later
/// commits would skip their fsync silently: the store must stop instead.
@Suite("SQLite store: durability cannot silently weaken")
struct SQLiteDurabilityTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    @Test(
        "a claim after which synchronous = FULL cannot be restored stops the store: every later call fails",
        arguments: [
            "PRAGMA synchronous = FULL; SELECT * FROM no_such_table",  // the statement fails
            "PRAGMA synchronous = NORMAL",  // it runs, but durability stays weak
        ]
    )
    func failedRestoreStopsTheStore(restore: String) async throws {
        var configuration = SQLiteStore.Configuration()
        configuration.restoreFullSynchronousSQL = restore
        try await withTemporaryStore(configuration: configuration) { store in
            let token = try DeviceToken(hex: String(repeating: "ab", count: 32))
            _ = try await store.register(Registration(token: token, group: "g", at: Self.start))
            let id = try await store.enqueue(
                NotificationRequest(
                    id: try RequestID("r1"),
                    groups: ["g"],
                    payload: Payload.alert("x"),
                    createdAt: Self.start
                )
            ).id
            await #expect(throws: StoreError.backend("")) {
                _ = try await store.claimChunk(
                    owner: InstanceID("a"),
                    now: Self.start,
                    leaseDuration: .seconds(30),
                    chunkSize: 10
                )
            }
            for call in [
                { _ = try await store.report(id) },
                { _ = try await store.register(Registration(token: token, group: "h", at: Self.start)) },
                {
                    _ = try await store.claimChunk(
                        owner: InstanceID("a"),
                        now: Self.start,
                        leaseDuration: .seconds(30),
                        chunkSize: 10
                    )
                },
            ] as [@Sendable () async throws -> Void] {
                let error = await #expect(throws: StoreError.self) { try await call() }
                #expect(error?.code == .backend)
                #expect(error?.message.contains("SQLite store stopped") == true, "\(String(describing: error))")
            }
        }
    }

    @Test("with the restore intact, claims leave the writer at synchronous = FULL and the store running")
    func restoredDurabilityKeepsTheStoreRunning() async throws {
        try await withTemporaryStore { store in
            let token = try DeviceToken(hex: String(repeating: "cd", count: 32))
            _ = try await store.register(Registration(token: token, group: "g", at: Self.start))
            _ = try await store.enqueue(
                NotificationRequest(
                    id: try RequestID("r1"),
                    groups: ["g"],
                    payload: Payload.alert("x"),
                    createdAt: Self.start
                )
            )
            let chunk = try await store.claimChunk(
                owner: InstanceID("a"),
                now: Self.start,
                leaseDuration: .seconds(30),
                chunkSize: 10
            )
            #expect(chunk != nil)
            #expect(try await store.report(try RequestID("r1"))?.state == .sending)
        }
    }
}

/// A claim's write without fsync is not interrupted by its caller's cancellation: landing after the commit,
/// it would fail the restore of `synchronous = FULL` and stop the store over a claim that succeeded.
@Suite("SQLite store: a cancelled caller of a write without fsync")
struct SQLiteUnsyncedCancellationTests {
    @Test("cancelled after the commit, before the restore: the store keeps running, fully synchronous")
    func cancellationAfterTheCommitKeepsTheStore() async throws {
        try await withTemporaryStore { store in
            let caller = Mutex<Task<Int, any Error>?>(nil)
            let task = Task {
                try await store.writeUnsynced { db -> Int in
                    try db.execute(sql: "CREATE TABLE probe (x INTEGER)")
                    // The caller is cancelled while its write runs (the handle is set just after the task
                    // starts; the wait is for that store, not for time).
                    while caller.withLock({ $0 == nil }) { sched_yield() }
                    caller.withLock { $0?.cancel() }
                    return 1
                }
            }
            caller.withLock { $0 = task }
            #expect(try await task.value == 1)
            _ = try await store.register(
                Registration(token: try DeviceToken(hex: String(repeating: "ab", count: 32)), group: "g", at: Date())
            )
            #expect(try await store.pragmas().synchronous == 2)
        }
    }
}
