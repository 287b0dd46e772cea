import Foundation
import PushgateCore
import Testing

@testable import PushgateSQLite

/// The SQLite store claims with the enqueue (``DeliveryLedger/enqueue(_:claiming:chunkSize:pageLimit:)``):
/// the conformance checks allow a store to claim nothing; this one must claim.
@Suite("SQLite store: a claim made with the enqueue")
struct SQLiteClaimOnEnqueueTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    static let owner = InstanceID("handoff")

    static func token(_ number: Int) -> DeviceToken {
        try! DeviceToken(hex: String(format: "%064x", 0xE0_0000 + number))
    }

    static func request(_ name: String, groups: [String] = [], devices: [DeviceToken] = []) -> NotificationRequest {
        NotificationRequest(
            id: try! RequestID(name),
            groups: groups,
            devices: devices,
            payload: Payload.alert("hi"),
            createdAt: start
        )
    }

    static func lease(at seconds: Double = 0) -> LeaseWindow {
        LeaseWindow(owner: owner, now: start.addingTimeInterval(seconds), duration: .seconds(30))
    }

    @Test("with nothing else waiting, the request's own first chunk is claimed and its first page read")
    func claimsTheRequestsFirstChunk() async throws {
        try await withTemporaryStore { store in
            _ = try await store.register(
                batch: (1...5).map { Registration(token: Self.token($0), group: "g", at: Self.start) }
            )
            let (stored, claimed) = try await store.enqueue(
                Self.request("r1", groups: ["g"]),
                claiming: Self.lease(),
                chunkSize: 4,
                pageLimit: 3
            )
            #expect(stored.targetCount == 5)
            let work = try #require(claimed)
            #expect(work.chunk.requestID == stored.id)
            #expect(work.chunk.leaseExpiresAt == Self.start.addingTimeInterval(30))
            #expect(work.firstPage.targets.map(\.token) == (1...3).map(Self.token))
            #expect(!work.firstPage.isEnd, "a page of 3 of a chunk of 4")
            #expect(try await store.report(stored.id)?.state == .sending, "cut, as by a claim")
            // The lease is held: another instance finds only the rest of the request.
            let other = try #require(
                try await store.claimChunk(
                    LeaseWindow(
                        owner: InstanceID("other"),
                        now: Self.start.addingTimeInterval(1),
                        duration: .seconds(30)
                    ),
                    chunkSize: 4
                )
            )
            #expect(other.after == work.chunk.through, "the next chunk, not the one just claimed")
        }
    }

    @Test("a request too large to be counted in the write transaction is counted first, then claimed the same way")
    func largeRequestIsPlannedInASnapshot() async throws {
        try await withTemporaryStore { store in
            let devices = SQLiteStore.plannedInWriterLimit + 1
            _ = try await store.register(
                batch: (1...devices).map { Registration(token: Self.token($0), group: "big", at: Self.start) }
            )
            _ = try await store.register(Registration(token: Self.token(devices + 1), group: "small", at: Self.start))
            let (stored, claimed) = try await store.enqueue(
                Self.request("r1", groups: ["big", "small", "unknown"]),
                claiming: Self.lease(),
                chunkSize: 10,
                pageLimit: 4
            )
            #expect(stored.targetCount == devices + 1)
            #expect(stored.unknownGroups == ["unknown"])
            let work = try #require(claimed)
            #expect(work.firstPage.targets.map(\.token) == (1...4).map(Self.token))
        }
    }

    @Test("direct tokens: claimed and paged the same way")
    func claimsDirectTokens() async throws {
        try await withTemporaryStore { store in
            let (_, claimed) = try await store.enqueue(
                Self.request("r1", devices: [Self.token(7), Self.token(8)]),
                claiming: Self.lease(),
                chunkSize: 10,
                pageLimit: 10
            )
            let work = try #require(claimed)
            #expect(work.chunk.kind == .directTokens)
            #expect(work.firstPage.targets.map(\.token) == [Self.token(7), Self.token(8)])
            #expect(work.firstPage.isEnd)
        }
    }

    @Test("a request with no valid target is done at once and nothing is claimed")
    func nothingToClaim() async throws {
        try await withTemporaryStore { store in
            _ = try await store.register(Registration(token: Self.token(1), group: "g", at: Self.start))
            _ = try await store.invalidate(
                app: Registration.defaultApp,
                token: Self.token(1),
                reason: .badDeviceToken,
                appleTimestamp: nil,
                at: Self.start
            )
            let (stored, claimed) = try await store.enqueue(
                Self.request("r1", groups: ["g"]),
                claiming: Self.lease(),
                chunkSize: 10,
                pageLimit: 10
            )
            #expect(claimed == nil)
            #expect(try await store.report(stored.id)?.state == .done)
        }
    }
}
