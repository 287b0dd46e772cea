import Foundation
import PushgateCore

/// ``DeliveryLedger/claimChunks(_:)``: many one-page chunks in one transaction.
enum MultiClaimChecks {
    typealias F = Fixture

    static func claim(
        _ store: any PushStore,
        _ owner: InstanceID = F.instanceA,
        at seconds: Int,
        chunkSize: Int = 100,
        pageLimit: Int = 10,
        maximumChunks: Int
    ) async throws -> [ClaimedWork] {
        try await store.claimChunks(
            BatchClaim(
                lease: LeaseWindow(owner: owner, now: F.at(seconds), duration: F.lease),
                chunkSize: chunkSize,
                pageLimit: pageLimit,
                maximumChunks: maximumChunks
            )
        )
    }

    /// Devices 1...count, each alone in group `u<n>`, and a request `r<n>` to each, in order.
    static func oneDeviceRequests(
        _ store: any PushStore,
        _ count: Int,
        expiration: Expiration = .immediately
    )
        async throws
    {
        for number in 1...count {
            try await F.register(store, [number], in: "u\(number)")
            _ = try await store.enqueue(F.request("r\(number)", groups: ["u\(number)"], expiration: expiration))
        }
    }

    static func manyOneDeviceRequestsInOneClaim(_ store: any PushStore) async throws {
        try await oneDeviceRequests(store, 5)
        let first = try await claim(store, at: 1, maximumChunks: 3)
        try expectEqual(first.map(\.chunk.requestID), ["r1", "r2", "r3"].map(F.requestID), "three, oldest first")
        for (number, work) in zip(1..., first) {
            try expectEqual(work.firstPage.targets.map(\.token), [F.token(number)], "r\(number)'s page: its device")
            try expect(work.firstPage.isEnd, "one page holds r\(number)'s chunk")
            try expectEqual(work.chunk.leaseExpiresAt, F.at(31), "leased")
        }
        let second = try await claim(store, F.instanceB, at: 2, maximumChunks: 10)
        try expectEqual(second.map(\.chunk.requestID), ["r4", "r5"].map(F.requestID), "the rest, to B")
        try expectEqual(try await claim(store, at: 3, maximumChunks: 10).count, 0, "nothing left while all are leased")
        // Delivered from the claim's pages, every request is done.
        for work in first + second {
            let owner = second.contains(work) ? F.instanceB : F.instanceA
            _ = try await store.recordProgress(
                ChunkProgress(
                    chunk: work.chunk,
                    through: work.firstPage.scannedThrough,
                    accepted: work.firstPage.targets.count,
                    completesChunk: true
                ),
                owner: owner,
                now: F.at(4),
                leaseDuration: F.lease
            )
        }
        for number in 1...5 {
            try expectEqual(try await store.report(F.requestID("r\(number)"))?.state, .done, "r\(number) done")
        }
    }

    static func aChunkLargerThanAPageEndsTheClaim(_ store: any PushStore) async throws {
        try await F.register(store, 1...10, in: "big")
        _ = try await store.enqueue(F.request("broadcast", groups: ["big"]))
        try await F.register(store, [11], in: "one")
        _ = try await store.enqueue(F.request("single", groups: ["one"]))
        let first = try await claim(store, at: 1, pageLimit: 4, maximumChunks: 10)
        try expectEqual(first.map(\.chunk.requestID), [F.requestID("broadcast")], "the broadcast's chunk alone")
        try expectEqual(first.first?.firstPage.targets.count, 4, "its first page")
        try expectEqual(first.first?.firstPage.isEnd, false, "more pages to come")
        let second = try await claim(store, at: 1, pageLimit: 4, maximumChunks: 10)
        try expectEqual(second.map(\.chunk.requestID), [F.requestID("single")], "then the single request")
    }

    static func nothingOfAnOverdueRequestIsClaimed(_ store: any PushStore) async throws {
        let expiry = Int64(F.at(10).timeIntervalSince1970)
        try await oneDeviceRequests(store, 2, expiration: .at(epochSeconds: expiry))
        try await F.register(store, [3], in: "u3")
        _ = try await store.enqueue(F.request("r3", groups: ["u3"]))
        let first = try await claim(store, at: 1, maximumChunks: 1)
        try expectEqual(first.map(\.chunk.requestID), [F.requestID("r1")], "r1 before its expiration")
        // r1's holder dies; by the time its lease ends, r1 and r2 are overdue.
        let late = try await claim(store, F.instanceB, at: 40, maximumChunks: 10)
        try expectEqual(late.map(\.chunk.requestID), [F.requestID("r3")], "neither r1 (taken over) nor r2 (cut)")
        try expectEqual(
            Set(try await store.expireOverdue(now: F.at(41))),
            [F.requestID("r1"), F.requestID("r2")],
            "they are expired by expireOverdue, not by the claim"
        )
        try expectEqual(try await claim(store, F.instanceB, at: 42, maximumChunks: 10).count, 0, "nothing after")
    }

    static func aMultiClaimsLeasesEndAndAreTakenOverOnce(_ store: any PushStore) async throws {
        try await oneDeviceRequests(store, 3)
        let byA = try await claim(store, at: 1, maximumChunks: 10)
        try expectEqual(byA.count, 3, "A claims all three")
        try expectEqual(try await claim(store, F.instanceB, at: 30, maximumChunks: 10).count, 0, "leased until 31 s")
        let byB = try await claim(store, F.instanceB, at: 31, maximumChunks: 10)
        try expectEqual(Set(byB.map(\.chunk.id)), Set(byA.map(\.chunk.id)), "B takes over each of A's chunks")
        try expect(byB.allSatisfy(\.chunk.isTakeover), "as takeovers")
        try expectEqual(byB.map(\.firstPage), byA.map(\.firstPage), "with the same pages")
        try expectEqual(try await claim(store, at: 32, maximumChunks: 10).count, 0, "once: B holds them now")
        let lateA = try await store.recordProgress(
            ChunkProgress(chunk: byA[0].chunk, through: byA[0].firstPage.scannedThrough, completesChunk: true),
            owner: F.instanceA,
            now: F.at(33),
            leaseDuration: F.lease
        )
        try expectEqual(lateA, .leaseLost, "A's late record is refused")
    }

    static func concurrentMultiClaimsNeverShareAChunk(_ store: any PushStore) async throws {
        try await oneDeviceRequests(store, 24)
        let owners = ["a", "b", "c", "d"].map(InstanceID.init)
        let claimed = try await withThrowingTaskGroup(of: [ClaimedWork].self) { group in
            for owner in owners {
                group.addTask {
                    var mine: [ClaimedWork] = []
                    while true {
                        let batch = try await claim(store, owner, at: 1, maximumChunks: 4)
                        if batch.isEmpty { return mine }
                        mine += batch
                    }
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        try expectEqual(claimed.count, 24, "every request's chunk claimed, once")
        try expectEqual(Set(claimed.map(\.chunk.id)).count, 24, "no chunk twice")
        try expectEqual(Set(claimed.map(\.chunk.requestID)).count, 24, "one chunk per request")
    }
}
