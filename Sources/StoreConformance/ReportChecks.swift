import Foundation
import PushgateCore

enum ReportChecks {
    typealias F = Fixture

    static func reportCountsByReason(_ store: any PushStore) async throws {
        try await F.register(store, 1...8, in: "g")
        let id = try await store.enqueue(F.request("r1", groups: ["g"])).id
        try await F.deliverAll(store, now: F.at(1), chunkSize: 3, pageSize: 2) { token in
            switch token {
            case F.token(4): .reject("BadDeviceToken", status: 400)
            case F.token(5), F.token(6): .reject("Unregistered", status: 410)
            case F.token(7): .retry("TooManyRequests", nextAttemptAt: F.at(2))
            case F.token(8): .reject("PayloadTooLarge", status: 413)
            default: .accept
            }
        }
        let claim = try await store.claimRetries(owner: F.instanceA, now: F.at(2), leaseDuration: F.lease, limit: 10)[0]
        _ = try await store.recordRetryOutcomes(
            [RetryOutcome(claim: claim, result: .failed(reason: "TooManyRequests", status: 429))],
            owner: F.instanceA,
            now: F.at(3)
        )
        let report = try unwrap(try await store.report(id), "report")
        try expectEqual(report.id, id, "id")
        try expectEqual(report.app, F.app, "app")
        try expectEqual(report.targets, 8, "targets")
        try expectEqual(report.accepted, 3, "accepted")
        try expectEqual(
            report.failedByReason,
            ["BadDeviceToken": 1, "Unregistered": 2, "PayloadTooLarge": 1, "TooManyRequests": 1],
            "failed by reason"
        )
        try expectEqual(report.failed, 5, "failed")
        try expectEqual(report.pendingRetries, 0, "pending")
        try expectEqual(report.state, .done, "state")
        try expectEqual(report.finishedAt, F.at(3), "finishedAt")
        try expect(report.lastAPNsID != nil, "an apns-id of an accepted notification is kept")
        let failures = try await store.failures(of: id, after: nil, limit: 10)
        try expectEqual(failures.map(\.token), [4, 5, 6, 7, 8].map(F.token), "failure rows, by token")
        try expectEqual(failures.map(\.status), [400, 410, 410, 429, 413], "statuses")
    }

    static func invalidationsWithProgressApplyToTheRegistry(_ store: any PushStore) async throws {
        try await F.register(store, 1...2, in: "g")
        _ = try await store.register(F.registration(2, "g", at: 100))
        _ = try await store.enqueue(F.request("r1", groups: ["g"], at: 101))
        let chunk = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(200), leaseDuration: F.lease, chunkSize: 10),
            "claim"
        )
        let result = try await store.recordProgress(
            ChunkProgress(
                chunk: chunk,
                through: chunk.through,
                failures: [
                    FailureEntry(token: F.token(1), reason: "Unregistered", status: 410, at: F.at(200)),
                    FailureEntry(token: F.token(2), reason: "Unregistered", status: 410, at: F.at(200)),
                ],
                invalidations: [
                    DeviceInvalidation(token: F.token(1), reason: .unregistered, appleTimestamp: F.at(150)),
                    DeviceInvalidation(token: F.token(2), reason: .unregistered, appleTimestamp: F.at(50)),
                ],
                completesChunk: true
            ),
            owner: F.instanceA,
            now: F.at(201),
            leaseDuration: F.lease
        )
        try expectEqual(result, .chunkCompleted, "recorded")
        let first = try unwrap(try await store.device(app: F.app, token: F.token(1)), "device 1")
        try expectEqual(first.state, .invalid, "device 1 is invalid")
        try expectEqual(first.invalidatedAt, F.at(201), "invalidated when recorded")
        try expectEqual(
            try await store.device(app: F.app, token: F.token(2))?.state,
            .valid,
            "device 2 was registered after Apple's timestamp"
        )
    }

    static func failuresAreListedByTokenInPages(_ store: any PushStore) async throws {
        try await F.register(store, [5, 3, 1, 4, 2], in: "g")
        let id = try await store.enqueue(F.request("r1", groups: ["g"])).id
        try await F.deliverAll(store) { _ in .reject("DeviceTokenNotForTopic", status: 400) }
        let first = try await store.failures(of: id, after: nil, limit: 2)
        try expectEqual(first.map(\.token), [1, 2].map(F.token), "first page")
        let second = try await store.failures(of: id, after: first.last?.token, limit: 2)
        try expectEqual(second.map(\.token), [3, 4].map(F.token), "second page")
        let third = try await store.failures(of: id, after: second.last?.token, limit: 2)
        try expectEqual(third.map(\.token), [F.token(5)], "last page")
        try expectEqual(third.first?.reason, "DeviceTokenNotForTopic", "reason")
        try expectEqual(third.first?.at, F.at(1), "time")
        try expectEqual(
            try await store.failures(of: F.requestID("unknown"), after: nil, limit: 2),
            [],
            "unknown request"
        )
    }

    static func reportOfAnUnknownRequestIsNil(_ store: any PushStore) async throws {
        try expectEqual(try await store.report(F.requestID("nope")), nil, "unknown request")
    }
}
