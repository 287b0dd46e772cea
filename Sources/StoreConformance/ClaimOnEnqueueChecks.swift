import Foundation
import PushgateCore

/// ``DeliveryLedger/enqueue(_:claiming:chunkSize:pageLimit:)``: a store may claim nothing with it, but
/// what it claims is what ``DeliveryLedger/claimChunk(_:chunkSize:)`` would have claimed, with the first
/// page ``DeliveryLedger/targets(of:after:limit:)`` would read, and it is all or nothing with the request.
enum ClaimOnEnqueueChecks {
    typealias F = Fixture

    static func claimWithEnqueueKeepsRequestOrder(_ store: any PushStore) async throws {
        try await F.register(store, 1...5, in: "g")
        _ = try await store.enqueue(F.request("first", groups: ["g"], at: 1))
        let lease = LeaseWindow(owner: F.instanceA, now: F.at(2), duration: F.lease)
        let (stored, claimed) = try await store.enqueue(
            F.request("second", groups: ["g"], at: 2),
            claiming: lease,
            chunkSize: 2,
            pageLimit: 10
        )
        try expectEqual(stored.targetCount, 5, "the request is stored as by enqueue")
        var sent = [RequestID: [DeviceToken]]()
        if let claimed {
            try expectEqual(claimed.chunk.requestID, F.requestID("first"), "the older request's chunk comes first")
            try expectEqual(claimed.chunk.leaseExpiresAt, F.at(32), "leased as a claim")
            try expectEqual(claimed.chunk.isTakeover, false, "a fresh chunk")
            let page = try await store.targets(of: claimed.chunk, after: claimed.chunk.progress, limit: 10)
            try expectEqual(claimed.firstPage, page, "its first page, as read afterwards")
            try expectEqual(page.targets.map(\.token), [1, 2].map(F.token), "the first two devices")
            sent[claimed.chunk.requestID, default: []] += try await F.deliver(
                claimed.chunk,
                store: store,
                now: F.at(3),
                pageSize: 10
            )
        }
        while let chunk = try await store.claimChunk(
            owner: F.instanceA,
            now: F.at(3),
            leaseDuration: F.lease,
            chunkSize: 2
        ) {
            sent[chunk.requestID, default: []] += try await F.deliver(chunk, store: store, now: F.at(3), pageSize: 10)
        }
        for name in ["first", "second"] {
            try expectEqual(sent[F.requestID(name)], (1...5).map(F.token), "\(name): every device once, in order")
            try expectEqual(try await store.report(F.requestID(name))?.state, .done, "\(name) is done")
        }
    }

    static func claimWithEnqueueOfARefusedRequestClaimsNothing(_ store: any PushStore) async throws {
        try await F.register(store, 1...3, in: "g")
        _ = try await store.enqueue(F.request("r1", groups: ["g"], at: 1))
        let lease = LeaseWindow(owner: F.instanceA, now: F.at(2), duration: F.lease)
        try await expectStoreError(.duplicateRequestID, "a second request with the same id") {
            _ = try await store.enqueue(
                F.request("r1", groups: ["g"], at: 2),
                claiming: lease,
                chunkSize: 10,
                pageLimit: 10
            )
        }
        let chunk = try unwrap(
            try await store.claimChunk(owner: F.instanceB, now: F.at(3), leaseDuration: F.lease, chunkSize: 10),
            "the pending work is still free to claim: the refused enqueue leased nothing"
        )
        try expectEqual(chunk.requestID, F.requestID("r1"), "r1's chunk")
        try expectEqual(chunk.isTakeover, false, "never leased before")
    }
}
