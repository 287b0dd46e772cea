import Foundation
import PushgateCore

enum RequestChecks {
    typealias F = Fixture

    static func enqueueCountsDistinctTargets(_ store: any PushStore) async throws {
        try await F.register(store, 1...10, in: "g1")
        try await F.register(store, 6...15, in: "g2")
        _ = try await store.invalidate(
            app: F.app,
            token: F.token(3),
            reason: .badDeviceToken,
            appleTimestamp: nil,
            at: F.at(0)
        )
        try await F.register(store, [50], in: "elsewhere")
        _ = try await store.invalidate(
            app: F.app,
            token: F.token(50),
            reason: .badDeviceToken,
            appleTimestamp: nil,
            at: F.at(0)
        )
        let result = try await store.enqueue(
            F.request(
                "r1",
                groups: ["g1", "g2", "g1"],
                devices: [F.token(5), F.token(100), F.token(100), F.token(200), F.token(50)]
            )
        )
        // 1...15 without 3 (invalid) = 14; 5 is a member; 100 twice counts once; 200; 50 is known invalid.
        try expectEqual(result.targetCount, 16, "distinct valid targets")
        try expectEqual(result.id, F.requestID("r1"), "id")
        let report = try unwrap(try await store.report(F.requestID("r1")), "report")
        try expectEqual(report.targets, 16, "report targets")
        try expectEqual(report.state, .queued, "state before any claim")
        try expectEqual(report.accepted, 0, "accepted")
        try expectEqual(report.pendingRetries, 0, "pending retries")
        try expectEqual(report.createdAt, F.at(0), "createdAt")
        try expectEqual(report.finishedAt, nil, "finishedAt")
    }

    static func unknownGroupsTargetNothingAndAreReported(_ store: any PushStore) async throws {
        try await F.register(store, 1...3, in: "g1")
        let result = try await store.enqueue(
            F.request("r1", groups: ["missing", "g1", "", "missing", "other"], devices: [F.token(9)])
        )
        try expectEqual(result.targetCount, 4, "the known group's devices and the direct token")
        try expectEqual(result.unknownGroups, ["missing", "", "other"], "unknown groups, in order, each once")
        let report = try unwrap(try await store.report(result.id), "report")
        try expectEqual(report.unknownGroups, ["missing", "", "other"], "the report lists the unknown groups")
        try expectEqual(report.targets, 4, "report targets")
        try expectEqual(
            try await store.request(result.id)?.groups,
            ["g1"],
            "the stored request targets the known group"
        )
        let sent = try await F.deliverAll(store)
        try expectEqual(Set(sent), Set([1, 2, 3, 9].map(F.token)), "delivered to the group that exists")
        try expectEqual(try await store.report(result.id)?.state, .done, "done")
        // Unknown groups with a device: the device is the target.
        let direct = try await store.enqueue(F.request("r2", groups: ["missing"], devices: [F.token(9)]))
        try expectEqual(direct.targetCount, 1, "the direct token")
        try expectEqual(try await store.report(direct.id)?.unknownGroups, ["missing"], "listed")
    }

    static func requestWhoseGroupsAreAllUnknownIsRejected(_ store: any PushStore) async throws {
        try await F.register(store, 1...3, in: "g1")
        try await expectStoreError(.unknownGroup, "a request whose groups are all unknown, without devices") {
            _ = try await store.enqueue(F.request("r1", groups: ["missing", "", "other"]))
        }
        try expectEqual(try await store.request(F.requestID("r1")), nil, "request not stored")
        try expectEqual(try await store.report(F.requestID("r1")), nil, "no report")
        try expectEqual(
            try await store.claimChunk(owner: F.instanceA, now: F.at(1), leaseDuration: F.lease, chunkSize: 10),
            nil,
            "no work"
        )
        // The id is still free.
        let again = try await store.enqueue(F.request("r1", groups: ["g1"]))
        try expectEqual(again.targetCount, 3, "the same id is accepted afterwards")
        try expectEqual(again.unknownGroups, [], "no unknown group")
        try expectEqual(try await store.report(again.id)?.unknownGroups, [], "none in the report")
    }

    static func requestWithoutTargetsIsRejected(_ store: any PushStore) async throws {
        try await expectStoreError(.noTargets, "a request with no group and no device") {
            _ = try await store.enqueue(F.request("r1"))
        }
        try expectEqual(try await store.report(F.requestID("r1")), nil, "no report")
    }

    static func duplicateRequestIDIsRejected(_ store: any PushStore) async throws {
        _ = try await store.enqueue(F.request("r1", devices: [F.token(1)]))
        try await expectStoreError(.duplicateRequestID, "a second request with the same id") {
            _ = try await store.enqueue(F.request("r1", devices: [F.token(2)]))
        }
        try expectEqual(
            try await store.request(F.requestID("r1"))?.devices,
            [F.token(1)],
            "the first request is intact"
        )
    }

    static func storedRequestReadsBackUnchanged(_ store: any PushStore) async throws {
        try await F.register(store, [1], in: "a")
        try await F.register(store, [2], in: "b")
        let variants: [NotificationRequest] = [
            NotificationRequest(
                id: F.requestID("full"),
                app: F.app,
                groups: ["a", "b"],
                devices: [F.token(7), F.token(1)],
                pushType: .background,
                priority: .conservePower,
                expiration: .at(epochSeconds: 1_900_000_000),
                collapseID: try CollapseID("news-1"),
                payload: try Payload(jsonString: #"{"aps":{"content-available":1},"k":[1,2]}"#),
                createdAt: F.at(3)
            ),
            NotificationRequest(
                id: F.requestID("plain"),
                app: F.app,
                devices: [F.token(8)],
                pushType: .voip,
                priority: .powerSaving,
                expiration: .storagePolicy,
                payload: Payload.alert("x"),
                createdAt: F.at(4)
            ),
            NotificationRequest(
                id: F.requestID("once"),
                app: F.app,
                groups: ["a"],
                expiration: .immediately,
                payload: Payload.alert("y"),
                createdAt: F.at(5)
            ),
        ]
        for request in variants {
            _ = try await store.enqueue(request)
            try expectEqual(try await store.request(request.id), request, "request \(request.id) read back")
        }
        try expectEqual(try await store.request(F.requestID("unknown")), nil, "unknown request")
    }

    static func requestWithNoValidTargetIsDoneAtOnce(_ store: any PushStore) async throws {
        try await F.register(store, [1], in: "g")
        _ = try await store.invalidate(
            app: F.app,
            token: F.token(1),
            reason: .badDeviceToken,
            appleTimestamp: nil,
            at: F.at(0)
        )
        _ = try await store.register(F.registration(2, "empty"))
        _ = try await store.unassign(app: F.app, token: F.token(2), group: "empty")
        let result = try await store.enqueue(F.request("r1", groups: ["g", "empty"], at: 2))
        try expectEqual(result.targetCount, 0, "no valid target")
        let report = try unwrap(try await store.report(result.id), "report")
        try expectEqual(report.state, .done, "state")
        try expectEqual(report.finishedAt, F.at(2), "finished when stored")
        try expectEqual(
            try await store.claimChunk(owner: F.instanceA, now: F.at(3), leaseDuration: F.lease, chunkSize: 10),
            nil,
            "no work"
        )
    }

    static func requestsTakeTurnsByChunkOldestFirst(_ store: any PushStore) async throws {
        try await F.register(store, 1...5, in: "g")
        _ = try await store.enqueue(F.request("zzz-first", groups: ["g"], at: 1))
        _ = try await store.enqueue(F.request("aaa-second", groups: ["g"], at: 2))
        let first = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(3), leaseDuration: F.lease, chunkSize: 2),
            "first claim"
        )
        try expectEqual(first.requestID, F.requestID("zzz-first"), "the request stored first is cut first")
        try expectEqual(try await store.report(first.requestID)?.state, .sending, "state once cut")
        try expectEqual(try await store.report(F.requestID("aaa-second"))?.state, .queued, "the other one waits")
        var order = [RequestID]()
        while let chunk = try await store.claimChunk(
            owner: F.instanceA,
            now: F.at(3),
            leaseDuration: F.lease,
            chunkSize: 2
        ) {
            order.append(chunk.requestID)
        }
        let (older, newer) = (F.requestID("zzz-first"), F.requestID("aaa-second"))
        try expectEqual(order, [newer, older, newer, older, newer], "one chunk of each request in turn")
    }
}
