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

    /// ``DeliveryLedger/reports(_:)`` answers, in the order asked, each known request's report exactly as
    /// ``DeliveryLedger/report(_:)`` does (counts by reason, pending retries and unknown groups kept apart
    /// per request), and leaves unknown ids out.
    static func reportsOfManyAreEachAsAlone(_ store: any PushStore) async throws {
        try await F.register(store, 1...4, in: "g")
        try await F.register(store, 5...6, in: "h")
        let first = try await store.enqueue(F.request("first", groups: ["g", "gone"])).id
        try await F.deliverAll(store, now: F.at(1)) { token in
            switch token {
            case F.token(2): .reject("BadDeviceToken", status: 400)
            case F.token(3): .retry("TooManyRequests", nextAttemptAt: F.at(5))
            default: .accept
            }
        }
        let second = try await store.enqueue(F.request("second", groups: ["h"], at: 2)).id
        try await F.deliverAll(store, now: F.at(2)) { token in
            token == F.token(6) ? .reject("Unregistered", status: 410) : .accept
        }
        let queued = try await store.enqueue(F.request("queued", groups: ["h", "other"], at: 3)).id
        let asked = [second, F.requestID("unknown"), first, queued, second]
        let reports = try await store.reports(asked)
        var alone = [DeliveryReport]()
        for id in asked {
            if let report = try await store.report(id) { alone.append(report) }
        }
        try expectEqual(reports.map(\.id), [second, first, queued, second], "in the order asked, unknown left out")
        try expectEqual(reports, alone, "each as report(_:) answers it")
        try expectEqual(reports[1].failedByReason, ["BadDeviceToken": 1], "first's failures are its own")
        try expectEqual(reports[1].pendingRetries, 1, "first's retry")
        try expectEqual(reports[1].unknownGroups, ["gone"], "first's unknown group")
        try expectEqual(reports[0].failedByReason, ["Unregistered": 1], "second's failures are its own")
        try expectEqual(reports[0].pendingRetries, 0, "second has no retry")
        try expectEqual(reports[2].unknownGroups, ["other"], "queued's unknown group")
        try expectEqual(reports[2].state, .queued, "queued is not sent yet")
        try expectEqual(try await store.reports([F.requestID("unknown")]), [], "only unknown ids")
    }

    static func reportOfAnUnknownRequestIsNil(_ store: any PushStore) async throws {
        try expectEqual(try await store.report(F.requestID("nope")), nil, "unknown request")
    }
}
