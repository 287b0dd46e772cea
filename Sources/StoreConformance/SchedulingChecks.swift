import Foundation
import PushgateCore

/// Which request's chunk ``DeliveryLedger/claimChunk(_:chunkSize:)`` cuts next (``ClaimScheduler``): the
/// same order in every store, read from the store, so that instances sharing one follow it too.
enum SchedulingChecks {
    typealias F = Fixture

    static let otherApp = "other-app"

    /// Claims `count` chunks of `chunkSize` and names the request of each.
    static func claimOrder(_ store: any PushStore, count: Int, chunkSize: Int = 2) async throws -> [RequestID] {
        var order = [RequestID]()
        for _ in 0..<count {
            guard
                let chunk = try await store.claimChunk(
                    owner: F.instanceA,
                    now: F.at(10),
                    leaseDuration: F.lease,
                    chunkSize: chunkSize
                )
            else { break }
            order.append(chunk.requestID)
        }
        return order
    }

    static func aOneChunkRequestPassesABroadcastsRemainingChunks(_ store: any PushStore) async throws {
        try await F.register(store, 1...10, in: "big")
        _ = try await store.enqueue(F.request("broadcast", groups: ["big"], at: 1))
        try expectEqual(try await claimOrder(store, count: 1), [F.requestID("broadcast")], "the broadcast starts")
        _ = try await store.enqueue(F.request("single", devices: [F.token(11)], at: 2))
        let order = try await claimOrder(store, count: 10)
        try expectEqual(
            order,
            ["single", "broadcast", "broadcast", "broadcast", "broadcast"].map(F.requestID),
            "the one-chunk request is cut before the broadcast's remaining chunks"
        )
    }

    static func urgentRequestsOfAnAppAreCutFirst(_ store: any PushStore) async throws {
        try await F.register(store, 1...4, in: "g")
        _ = try await store.enqueue(F.request("normal", groups: ["g"], at: 1, priority: .conservePower))
        _ = try await store.enqueue(F.request("background", groups: ["g"], at: 2, priority: .powerSaving))
        _ = try await store.enqueue(F.request("urgent", groups: ["g"], at: 3, priority: .immediate))
        let order = try await claimOrder(store, count: 10)
        try expectEqual(
            order,
            ["urgent", "normal", "background", "urgent", "normal", "background"].map(F.requestID),
            "urgent first among requests waiting for their first chunk; then each in turn, nobody starves"
        )
    }

    static func appsTakeTurns(_ store: any PushStore) async throws {
        try await F.register(store, 1...10, in: "a")
        _ = try await store.register(batch: (21...30).map { F.registration($0, "b", app: otherApp) })
        _ = try await store.enqueue(F.request("a-big", groups: ["a"], at: 1))
        try expectEqual(try await claimOrder(store, count: 1), [F.requestID("a-big")], "app A's broadcast starts")
        for name in ["a1", "a2", "a3"] {
            _ = try await store.enqueue(F.request(name, devices: [F.token(11)], at: 2))
        }
        _ = try await store.enqueue(F.request("b-big", groups: ["b"], at: 3, app: otherApp))
        let order = try await claimOrder(store, count: 20)
        try expectEqual(
            order,
            ["b-big", "a1", "b-big", "a2", "b-big", "a-big", "b-big", "a3", "b-big", "a-big", "a-big", "a-big"]
                .map(F.requestID),
            "the apps alternate; app A's new requests go before its broadcast, which still has a turn every round"
        )
    }
}
