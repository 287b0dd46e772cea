import Foundation
import PushgateCore
import StoreConformance
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

    @Test("a batch's chunks of small groups read their first pages in one statement: the pages a read gives after")
    func smallGroupsFirstPagesTogether() async throws {
        let statements = RecordedStatements()
        var configuration = SQLiteStore.Configuration()
        configuration.statementObserver = { statements.record($0) }
        try await withTemporaryStore(configuration: configuration) { store in
            // a: one device; b: three, one of them invalidated; c: two; d: five, more than a page of 3.
            let groups: [(name: String, devices: ClosedRange<Int>)] = [
                ("a", 1...1), ("b", 2...4), ("c", 5...6), ("d", 7...11),
            ]
            for group in groups {
                _ = try await store.register(
                    batch: group.devices.map { Registration(token: Self.token($0), group: group.name, at: Self.start) }
                )
            }
            _ = try await store.invalidate(
                app: Registration.defaultApp,
                token: Self.token(3),
                reason: .unregistered,
                appleTimestamp: Self.start,
                at: Self.start
            )
            _ = statements.take()
            let outcome = try await store.enqueue(
                batch: groups.map { Self.request("r-\($0.name)", groups: [$0.name]) },
                claiming: BatchClaim(lease: Self.lease(), chunkSize: 10, pageLimit: 3, maximumChunks: 8)
            )
            let written = statements.take()
            #expect(outcome.claimed.count == 4, "a chunk of each request")
            for work in outcome.claimed {
                let page = try await store.targets(of: work.chunk, after: work.chunk.progress, limit: 3)
                #expect(work.firstPage == page, "\(work.chunk.requestID)'s first page, as read afterwards")
            }
            let pages = Dictionary(
                uniqueKeysWithValues: outcome.claimed.map { ($0.chunk.requestID.value, $0.firstPage) }
            )
            #expect(pages["r-a"]?.targets.map(\.token) == [Self.token(1)])
            #expect(pages["r-b"]?.targets.map(\.token) == [Self.token(2), Self.token(4)], "not the invalidated one")
            #expect(pages["r-c"]?.targets.map(\.token) == [Self.token(5), Self.token(6)])
            #expect(pages["r-d"]?.targets.map(\.token) == (7...9).map(Self.token), "a page of d's five")
            #expect(
                written.filter { $0.contains("FROM json_each(?) j\nJOIN membership m") }.count == 1,
                "a, b, c together"
            )
            #expect(
                written.filter { $0.contains("FROM membership m JOIN device d") }.count == 1,
                "d alone, with a limit"
            )
        }
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

    /// A chunk and its first page, as compared between the two ways of claiming.
    struct Cut: Hashable {
        var request: RequestID
        var kind: WorkChunk.Kind
        var after: Int64
        var through: Int64
        var targets: [DeviceToken]
        var isEnd: Bool
    }

    /// The group commit's claim takes a one-group request's first cut from the membership count its
    /// enqueue read (no scan): the chunks and first pages must be the ones a claim of its own, which
    /// scans, cuts from the same requests. Groups around the chunk size, with an invalid member, an
    /// unassigned one, a device registered after the others (so the bound is past every group's last
    /// member), an empty group and a request of two overlapping groups.
    @Test(
        "a batch's claim cuts one-group requests from their membership counts exactly as a scan would",
        arguments: [3, 4]
    )
    func batchClaimCutsAsAScanWould(pageLimit: Int) async throws {
        let chunkSize = 4
        let sizes = ["g1": 1, "g3": 3, "g4": 4, "g5": 5, "g9": 9]
        func fill(_ store: SQLiteStore) async throws {
            var registrations: [Registration] = []
            var number = 0
            // Interleaved, so that a group's members are not consecutive ids.
            for round in 0..<9 {
                for (group, size) in sizes.sorted(by: { $0.key < $1.key }) where round < size {
                    number += 1
                    registrations.append(Registration(token: Self.token(number), group: group, at: Self.start))
                }
            }
            _ = try await store.register(batch: registrations)
            _ = try await store.register(Registration(token: Self.token(1_000), group: "empty-later", at: Self.start))
            _ = try await store.unassign(app: Registration.defaultApp, token: Self.token(1_000), group: "empty-later")
            // g3's second member (number 7 in the interleaving) invalid; g5's first (3) taken out of it.
            _ = try await store.invalidate(
                app: Registration.defaultApp,
                token: Self.token(7),
                reason: .badDeviceToken,
                appleTimestamp: nil,
                at: Self.start
            )
            _ = try await store.unassign(app: Registration.defaultApp, token: Self.token(3), group: "g5")
            _ = try await store.register(Registration(token: Self.token(2_000), group: "late", at: Self.start))
        }
        let requests =
            sizes.keys.sorted().map { Self.request("r-\($0)", groups: [$0]) }
            + [Self.request("r-empty", groups: ["empty-later"]), Self.request("r-two", groups: ["g4", "g5"])]
        let claim = BatchClaim(lease: Self.lease(), chunkSize: chunkSize, pageLimit: pageLimit, maximumChunks: 100)
        func cuts(_ claimed: [ClaimedWork]) -> [Cut] {
            claimed.map {
                Cut(
                    request: $0.chunk.requestID,
                    kind: $0.chunk.kind,
                    after: $0.chunk.after,
                    through: $0.chunk.through,
                    targets: $0.firstPage.targets.map(\.token),
                    isEnd: $0.firstPage.isEnd
                )
            }
        }
        func rest(_ store: SQLiteStore) async throws -> [Cut] {
            var all: [Cut] = []
            while case let more = try await store.claimChunks(claim), !more.isEmpty { all += cuts(more) }
            return all
        }
        let (withEnqueue, withEnqueueRest) = try await withTemporaryStore { store in
            try await fill(store)
            let stored = try await store.enqueue(batch: requests, claiming: claim)
            return (cuts(stored.claimed), try await rest(store))
        }
        let (scanned, scannedRest) = try await withTemporaryStore { store in
            try await fill(store)
            let stored = try await store.enqueue(batch: requests, claiming: nil)
            #expect(stored.claimed.isEmpty)
            return (cuts(try await store.claimChunks(claim)), try await rest(store))
        }
        if pageLimit >= chunkSize {
            #expect(withEnqueue.count == requests.count - 1, "one chunk of each request with targets: \(withEnqueue)")
        } else {
            #expect(withEnqueue.count < requests.count - 1, "a chunk that may not fit a page ends the claim")
        }
        #expect(Set(withEnqueue) == Set(scanned))
        #expect(Set(withEnqueueRest) == Set(scannedRest))
        #expect(withEnqueueRest.contains { $0.request.description == "r-g9" }, "g9's second chunk")
    }
}
