import Foundation
import PushgateCore

enum LeaseChecks {
    typealias F = Fixture

    static func chunksAreLeasedToOneOwnerAtATime(_ store: any PushStore) async throws {
        try await F.register(store, 1...10, in: "g")
        _ = try await store.enqueue(F.request("r1", groups: ["g"]))
        let first = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(1), leaseDuration: F.lease, chunkSize: 5),
            "A's claim"
        )
        try expectEqual(first.leaseExpiresAt, F.at(31), "lease end")
        let second = try unwrap(
            try await store.claimChunk(owner: F.instanceB, now: F.at(2), leaseDuration: F.lease, chunkSize: 5),
            "B's claim"
        )
        try expect(first.id != second.id, "B gets another chunk")
        try expect(second.after >= first.through, "chunks do not overlap (\(first) / \(second))")
        try expectEqual(
            try await store.claimChunk(owner: F.instanceB, now: F.at(3), leaseDuration: F.lease, chunkSize: 5),
            nil,
            "nothing while both are leased and nothing is left to cut"
        )
        let takenOver = try unwrap(
            try await store.claimChunk(owner: F.instanceB, now: F.at(31), leaseDuration: F.lease, chunkSize: 5),
            "claim once A's lease has ended"
        )
        try expectEqual(takenOver.id, first.id, "A's chunk")
        try expectEqual(takenOver.isTakeover, true, "marked as a takeover")
        try expect(takenOver.leaseGeneration != first.leaseGeneration, "a new lease generation")
    }

    static func expiredLeaseIsTakenOver(_ store: any PushStore) async throws {
        try await F.register(store, 1...10, in: "g")
        let id = try await store.enqueue(F.request("r1", groups: ["g"])).id
        let chunk = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(1), leaseDuration: F.lease, chunkSize: 100),
            "claim"
        )
        let sentByA = try await F.deliver(
            chunk,
            store: store,
            owner: F.instanceA,
            now: F.at(2),
            pageSize: 4,
            maximumPages: 1
        )
        try expectEqual(sentByA, (1...4).map(F.token), "A's first page")
        // A dies. Its lease (renewed at 2 s) runs out at 32 s.
        try expectEqual(
            try await store.claimChunk(owner: F.instanceB, now: F.at(31), leaseDuration: F.lease, chunkSize: 100),
            nil,
            "not before the renewed lease ends"
        )
        let resumed = try unwrap(
            try await store.claimChunk(owner: F.instanceB, now: F.at(32), leaseDuration: F.lease, chunkSize: 100),
            "B's takeover"
        )
        try expectEqual(resumed.id, chunk.id, "same chunk")
        try expectEqual(resumed.isTakeover, true, "takeover")
        try expect(resumed.progress > chunk.progress, "resumes from A's recorded progress")
        let sentByB = try await F.deliver(resumed, store: store, owner: F.instanceB, now: F.at(33))
        try expectEqual(sentByB, (5...10).map(F.token), "B sends only what A had not recorded")
        let report = try unwrap(try await store.report(id), "report")
        try expectEqual(report.accepted, 10, "accepted")
        try expectEqual(report.state, .done, "state")
    }

    static func progressWithLostLeaseIsRefused(_ store: any PushStore) async throws {
        try await F.register(store, 1...6, in: "g")
        let id = try await store.enqueue(F.request("r1", groups: ["g"])).id
        let stale = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(1), leaseDuration: F.lease, chunkSize: 100),
            "A"
        )
        let current = try unwrap(
            try await store.claimChunk(owner: F.instanceB, now: F.at(40), leaseDuration: F.lease, chunkSize: 100),
            "B"
        )
        try expectEqual(current.id, stale.id, "B took A's chunk")
        let refused = try await store.recordProgress(
            ChunkProgress(
                chunk: stale,
                through: stale.through,
                accepted: 3,
                lastAPNsID: "late",
                retries: [
                    RetryEntry(token: F.token(4), attempt: 1, nextAttemptAt: F.at(50), reason: "TooManyRequests")
                ],
                failures: [FailureEntry(token: F.token(5), reason: "BadDeviceToken", status: 400, at: F.at(41))],
                invalidations: [DeviceInvalidation(token: F.token(5), reason: .badDeviceToken, appleTimestamp: nil)],
                completesChunk: true
            ),
            owner: F.instanceA,
            now: F.at(41),
            leaseDuration: F.lease
        )
        try expectEqual(refused, .leaseLost, "A's late progress")
        let report = try unwrap(try await store.report(id), "report")
        try expectEqual(report.accepted, 0, "no accepted count written")
        try expectEqual(report.failedByReason, [:], "no failure written")
        try expectEqual(report.pendingRetries, 0, "no retry written")
        try expectEqual(report.lastAPNsID, nil, "no apns-id written")
        try expectEqual(try await store.device(app: F.app, token: F.token(5))?.state, .valid, "no invalidation applied")
        // The same owner with a stale generation is refused too (a restarted instance vs. its old run).
        let sameOwnerStale = WorkChunk(
            id: current.id,
            requestID: current.requestID,
            kind: current.kind,
            after: current.after,
            through: current.through,
            progress: current.progress,
            leaseGeneration: stale.leaseGeneration,
            leaseExpiresAt: current.leaseExpiresAt,
            isTakeover: false
        )
        try expectEqual(
            try await store.recordProgress(
                ChunkProgress(chunk: sameOwnerStale, through: current.through, accepted: 1),
                owner: F.instanceB,
                now: F.at(42),
                leaseDuration: F.lease
            ),
            .leaseLost,
            "a stale generation"
        )
        let sent = try await F.deliver(current, store: store, owner: F.instanceB, now: F.at(42))
        try expectEqual(sent.count, 6, "B delivers the chunk")
        try expectEqual(try await store.report(id)?.accepted, 6, "only B's outcomes count")
    }

    static func progressRenewsTheLease(_ store: any PushStore) async throws {
        try await F.register(store, 1...4, in: "g")
        _ = try await store.enqueue(F.request("r1", groups: ["g"]))
        let chunk = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(0), leaseDuration: F.lease, chunkSize: 100),
            "claim"
        )
        let page = try await store.targets(of: chunk, after: chunk.progress, limit: 2)
        let result = try await store.recordProgress(
            ChunkProgress(chunk: chunk, through: page.scannedThrough, accepted: 2),
            owner: F.instanceA,
            now: F.at(20),
            leaseDuration: F.lease
        )
        try expectEqual(result, .recorded(leaseExpiresAt: F.at(50)), "lease renewed from the time of the progress")
        try expectEqual(
            try await store.claimChunk(owner: F.instanceB, now: F.at(40), leaseDuration: F.lease, chunkSize: 100),
            nil,
            "not claimable within the renewed lease"
        )
        // A lease that ran out but was not taken over is still honoured.
        let late = try await store.recordProgress(
            ChunkProgress(chunk: chunk, through: chunk.through, accepted: 2, completesChunk: true),
            owner: F.instanceA,
            now: F.at(70),
            leaseDuration: F.lease
        )
        try expectEqual(late, .chunkCompleted, "progress after the lease ran out, before any takeover")
    }

    static func progressNeverMovesBack(_ store: any PushStore) async throws {
        try await F.register(store, 1...10, in: "g")
        _ = try await store.enqueue(F.request("r1", groups: ["g"]))
        let chunk = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(0), leaseDuration: F.lease, chunkSize: 100),
            "claim"
        )
        let first = try await store.targets(of: chunk, after: chunk.progress, limit: 6)
        _ = try await store.recordProgress(
            ChunkProgress(chunk: chunk, through: first.scannedThrough, accepted: 6),
            owner: F.instanceA,
            now: F.at(1),
            leaseDuration: F.lease
        )
        _ = try await store.recordProgress(
            ChunkProgress(chunk: chunk, through: first.targets[2].cursor),
            owner: F.instanceA,
            now: F.at(2),
            leaseDuration: F.lease
        )
        let resumed = try unwrap(
            try await store.claimChunk(owner: F.instanceB, now: F.at(100), leaseDuration: F.lease, chunkSize: 100),
            "takeover"
        )
        try expectEqual(resumed.progress, first.scannedThrough, "the furthest progress recorded")
    }

    static func restartedInstanceReclaimsItsOwnChunksAtOnce(_ store: any PushStore) async throws {
        try await F.register(store, 1...10, in: "g")
        _ = try await store.enqueue(F.request("r1", groups: ["g"]))
        let beforeCrash = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(0), leaseDuration: F.lease, chunkSize: 5),
            "claim"
        )
        // The process is killed and restarted with the same instance id, long before the lease ends.
        try expectEqual(try await store.releaseLeases(owner: F.instanceA, now: F.at(1)), 1, "leases released")
        let afterRestart = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(1), leaseDuration: F.lease, chunkSize: 5),
            "reclaim"
        )
        try expectEqual(afterRestart.id, beforeCrash.id, "its own chunk comes back first")
        try expectEqual(afterRestart.isTakeover, true, "as a takeover")
        try expectEqual(
            try await store.recordProgress(
                ChunkProgress(chunk: beforeCrash, through: beforeCrash.through, accepted: 5, completesChunk: true),
                owner: F.instanceA,
                now: F.at(2),
                leaseDuration: F.lease
            ),
            .leaseLost,
            "the old run's progress is refused"
        )
        try expectEqual(try await store.releaseLeases(owner: F.instanceB, now: F.at(2)), 0, "B held nothing")
    }

    /// An instance dies with three chunks in flight; another finishes the request. Every device gets the
    /// notification, and only targets the dead instance had not recorded are sent again.
    static func nothingAcceptedIsLostWhenAnInstanceDies(_ store: any PushStore) async throws {
        try await F.register(store, 1...100, in: "g")
        let id = try await store.enqueue(F.request("r1", groups: ["g"])).id
        var recordedByA = [DeviceToken]()
        var inFlightAtCrash = [DeviceToken]()
        for _ in 0..<3 {
            let chunk = try unwrap(
                try await store.claimChunk(owner: F.instanceA, now: F.at(1), leaseDuration: F.lease, chunkSize: 10),
                "A"
            )
            recordedByA += try await F.deliver(
                chunk,
                store: store,
                owner: F.instanceA,
                now: F.at(1),
                pageSize: 3,
                maximumPages: 2
            )
            // Sent, but A dies before recording these.
            let cursor = try await store.targets(of: chunk, after: chunk.progress, limit: 6).scannedThrough
            inFlightAtCrash += try await store.targets(of: chunk, after: cursor, limit: 2).targets.map(\.token)
        }
        let sentByB = try await F.deliverAll(store, owner: F.instanceB, now: F.at(40), chunkSize: 10, pageSize: 7)
        try expectEqual(Set(recordedByA).intersection(sentByB), [], "nothing A recorded is sent again")
        try expectEqual(Set(recordedByA).union(sentByB), Set((1...100).map(F.token)), "every device got it")
        try expect(Set(inFlightAtCrash).isSubset(of: Set(sentByB)), "A's unrecorded in-flight sends are redone")
        let report = try unwrap(try await store.report(id), "report")
        try expectEqual(report.accepted, 100, "accepted")
        try expectEqual(report.state, .done, "state")
    }

    /// Four instances claim and deliver at the same time: each device once, each chunk to one of them.
    static func concurrentInstancesNeverShareAChunk(_ store: any PushStore) async throws {
        try await F.register(store, 1...2_000, in: "a")
        try await F.register(store, 1_500...3_000, in: "b")
        let id = try await store.enqueue(F.request("r1", groups: ["a", "b"], devices: [F.token(9_999)])).id
        let sentByInstance = try await withThrowingTaskGroup(of: [DeviceToken].self) { group in
            for index in 0..<4 {
                group.addTask {
                    try await F.deliverAll(
                        store,
                        owner: InstanceID("instance-\(index)"),
                        now: F.at(1),
                        chunkSize: 97,
                        pageSize: 31
                    )
                }
            }
            var all = [[DeviceToken]]()
            for try await sent in group { all.append(sent) }
            return all
        }
        let sent = sentByInstance.flatMap { $0 }
        try expectEqual(sent.count, 3_001, "sends")
        try expectEqual(Set(sent), Set((1...3_000).map(F.token) + [F.token(9_999)]), "every device once")
        let report = try unwrap(try await store.report(id), "report")
        try expectEqual(report.accepted, 3_001, "accepted")
        try expectEqual(report.state, .done, "state")
    }
}
