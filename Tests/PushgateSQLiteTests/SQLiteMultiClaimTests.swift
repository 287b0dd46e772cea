import Foundation
import PushgateCore
import Testing

@testable import PushgateSQLite

/// What a multi-chunk claim (``DeliveryLedger/claimChunks(_:)``) trades: many chunks leased in one
/// transaction. A failure inside it, or a crash after it, must never lose a chunk or hand one out twice.
@Suite("SQLite store: a multi-chunk claim fails or crashes without losing or doubling a chunk")
struct SQLiteMultiClaimTests {
    typealias Fixture = SQLiteClaimOnEnqueueTests

    static func claim(_ store: SQLiteStore, owner: InstanceID, at seconds: Double) async throws -> [ClaimedWork] {
        try await store.claimChunks(
            BatchClaim(
                lease: LeaseWindow(
                    owner: owner,
                    now: Fixture.start.addingTimeInterval(seconds),
                    duration: .seconds(30)
                ),
                chunkSize: 100,
                pageLimit: 100,
                maximumChunks: 100
            )
        )
    }

    /// Devices 1...count, each alone in its group, and one request to each.
    static func oneDeviceRequests(_ store: SQLiteStore, _ count: Int) async throws {
        for number in 1...count {
            _ = try await store.register(
                batch: [Registration(token: Fixture.token(number), group: "u\(number)", at: Fixture.start)]
            )
            _ = try await store.enqueue(Fixture.request("r\(number)", groups: ["u\(number)"]))
        }
    }

    @Test("a failure mid-claim claims nothing: the next claim takes every chunk, each once")
    func failureMidClaim() async throws {
        try await withTemporaryStore { store in
            try await Self.oneDeviceRequests(store, 6)
            // A real SQLite failure inside the claim's transaction, after three chunks were inserted.
            try await store.write { db in
                try db.execute(
                    sql: """
                        CREATE TRIGGER fail_fourth BEFORE INSERT ON chunk WHEN (SELECT count(*) FROM chunk) = 3
                        BEGIN SELECT RAISE(ABORT, 'injected failure'); END
                        """
                )
            }
            await #expect(throws: (any Error).self) {
                try await Self.claim(store, owner: Fixture.owner, at: 1)
            }
            let chunks = try await store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM chunk") }
            #expect(chunks == 0, "rolled back: no chunk is leased to anyone")
            try await store.write { db in try db.execute(sql: "DROP TRIGGER fail_fourth") }
            let claimed = try await Self.claim(store, owner: Fixture.owner, at: 2)
            #expect(claimed.map(\.chunk.requestID) == (1...6).map { try! RequestID("r\($0)") })
            #expect(claimed.allSatisfy { !$0.chunk.isTakeover && $0.firstPage.targets.count == 1 })
        }
    }

    @Test("a crash after the claim: on restart the chunks are released and claimed again, each once, from their start")
    func crashAfterClaim() async throws {
        try await withTemporaryStore { store in
            try await Self.oneDeviceRequests(store, 5)
            let before = try await Self.claim(store, owner: Fixture.owner, at: 1)
            #expect(before.count == 5)
            // The first two were delivered and recorded; then the process died.
            for work in before.prefix(2) {
                _ = try await store.recordProgress(
                    ChunkProgress(
                        chunk: work.chunk,
                        through: work.firstPage.scannedThrough,
                        accepted: 1,
                        completesChunk: true
                    ),
                    owner: Fixture.owner,
                    now: Fixture.start.addingTimeInterval(2),
                    leaseDuration: .seconds(30)
                )
            }
            // The restart releases what the previous run held (``Dispatcher`` does this first).
            #expect(try await store.releaseLeases(owner: Fixture.owner, now: Fixture.start.addingTimeInterval(3)) == 3)
            let after = try await Self.claim(store, owner: Fixture.owner, at: 3)
            #expect(
                after.map(\.chunk.id) == before.suffix(3).map(\.chunk.id),
                "the three undelivered, not the two done"
            )
            #expect(after.allSatisfy { $0.chunk.isTakeover })
            #expect(after.map(\.firstPage) == before.suffix(3).map(\.firstPage), "each from its start")
            #expect(try await Self.claim(store, owner: Fixture.owner, at: 4).isEmpty, "and no chunk a third time")
        }
    }
}
