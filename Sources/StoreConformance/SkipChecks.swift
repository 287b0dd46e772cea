import Foundation
import PushgateCore

/// Targets counted when a request is stored but invalidated or removed before fan-out read them: skipped,
/// counted once, so that a finished request has `targets = accepted + failed + skipped`.
enum SkipChecks {
    typealias F = Fixture

    /// A finished request's arithmetic.
    static func expectBalanced(_ report: DeliveryReport, _ what: String) throws {
        try expect(report.state.isFinished, "\(what): finished (\(report.state))")
        try expectEqual(
            report.targets,
            report.accepted + report.failed + report.skipped,
            "\(what): targets = accepted + failed + skipped (\(report))"
        )
    }

    /// A page read and recorded by one holder, the next page read but not recorded when it died: the
    /// holder that takes over reads from the recorded progress, so each skipped target counts once, and
    /// the dead holder's late record counts nothing.
    static func skippedTargetsCountOnceAcrossATakeover(_ store: any PushStore) async throws {
        try await F.register(store, 1...6, in: "g")
        let result = try await store.enqueue(F.request("r1", groups: ["g"], at: 1))
        for number in [2, 5] {
            _ = try await store.invalidate(
                app: F.app,
                token: F.token(number),
                reason: .unregistered,
                appleTimestamp: F.at(1),
                at: F.at(2)
            )
        }
        let chunk = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(3), leaseDuration: F.lease, chunkSize: 10),
            "chunk"
        )
        let first = try await store.targets(of: chunk, after: chunk.progress, limit: 3)
        try expectEqual(first.targets.map(\.token), [1, 3].map(F.token), "the first page's targets")
        try expectEqual(first.skipped.count, 1, "the first page skips device 2")
        try expect(first.skipped.allSatisfy { $0 <= first.scannedThrough }, "within the page")
        try expect(
            try await store.recordProgress(
                ChunkProgress(chunk: chunk, through: first.scannedThrough, accepted: 2, skipped: 1),
                owner: F.instanceA,
                now: F.at(3),
                leaseDuration: F.lease
            ) != .leaseLost,
            "recorded"
        )
        let second = try await store.targets(of: chunk, after: first.scannedThrough, limit: 3)
        try expectEqual(second.skipped.count, 1, "the second page skips device 5")
        // Instance A dies here; B takes the chunk over once A's lease ran out.
        let takenOver = try unwrap(
            try await store.claimChunk(owner: F.instanceB, now: F.at(40), leaseDuration: F.lease, chunkSize: 10),
            "taken over"
        )
        try expectEqual(takenOver.progress, first.scannedThrough, "from the recorded progress")
        let sent = try await F.deliver(takenOver, store: store, owner: F.instanceB, now: F.at(40), pageSize: 3)
        try expectEqual(sent, [4, 6].map(F.token), "the rest")
        try expectEqual(
            try await store.recordProgress(
                ChunkProgress(chunk: chunk, through: second.scannedThrough, accepted: 2, skipped: 1),
                owner: F.instanceA,
                now: F.at(41),
                leaseDuration: F.lease
            ),
            .leaseLost,
            "the dead holder's late record is refused"
        )
        let report = try unwrap(try await store.report(result.id), "report")
        try expectEqual(report.accepted, 4, "accepted")
        try expectEqual(report.skipped, 2, "each skipped target once")
        try expectBalanced(report, "a takeover")
    }

    /// Direct tokens: one unknown when the request was stored (a target) registered and invalidated
    /// since, one valid then and invalidated since; both skipped. One invalid before: never a target.
    static func directTokensInvalidatedAfterEnqueueAreSkipped(_ store: any PushStore) async throws {
        try await F.register(store, [31, 32, 33], in: "other")
        _ = try await store.invalidate(
            app: F.app,
            token: F.token(33),
            reason: .badDeviceToken,
            appleTimestamp: nil,
            at: F.at(0)
        )
        let result = try await store.enqueue(
            F.request("r1", devices: [F.token(30), F.token(31), F.token(32), F.token(33)], at: 1)
        )
        try expectEqual(result.targetCount, 3, "target count: 33 was invalid already")
        try await F.register(store, [30], in: "other", at: 2)
        for number in [30, 31] {
            _ = try await store.invalidate(
                app: F.app,
                token: F.token(number),
                reason: .badDeviceToken,
                appleTimestamp: nil,
                at: F.at(2)
            )
        }
        let sent = try await F.deliverAll(store, now: F.at(3), chunkSize: 2, pageSize: 1)
        try expectEqual(sent, [F.token(32)], "the valid one only")
        let report = try unwrap(try await store.report(result.id), "report")
        try expectEqual(report.skipped, 2, "skipped")
        try expectBalanced(report, "direct tokens")
    }

    /// An expiring request's targets that no page read count as failed `expired`, those invalidated or
    /// removed since it was stored included; what pages skipped stays skipped.
    static func expiryCountsUnreadTargetsAsExpired(_ store: any PushStore) async throws {
        try await F.register(store, 1...6, in: "g")
        let request = F.request(
            "r1",
            groups: ["g"],
            expiration: .at(epochSeconds: Int64(F.at(60).timeIntervalSince1970)),
            at: 1
        )
        let id = try await store.enqueue(request).id
        for number in [2, 4] {
            _ = try await store.invalidate(
                app: F.app,
                token: F.token(number),
                reason: .unregistered,
                appleTimestamp: F.at(1),
                at: F.at(2)
            )
        }
        _ = try await store.unassign(app: F.app, token: F.token(5), group: "g")
        let chunk = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(3), leaseDuration: F.lease, chunkSize: 2),
            "chunk"
        )
        try expectEqual(try await F.deliver(chunk, store: store, now: F.at(3)), [F.token(1)], "device 1")
        try expectEqual(try await store.expireOverdue(now: F.at(61)), [id], "expired")
        let report = try unwrap(try await store.report(id), "report")
        try expectEqual(report.accepted, 1, "accepted")
        try expectEqual(report.skipped, 1, "device 2, skipped by the page that read it")
        try expectEqual(report.failedByReason, [FailureEntry.expiredReason: 4], "3, 4 (invalidated), 5 (removed), 6")
        try expectBalanced(report, "an expired request")
    }

    /// Invalidated or removed after its page was read and sent: it has its outcome, and is no skip.
    static func changesAfterThePageReadAreNotSkips(_ store: any PushStore) async throws {
        try await F.register(store, 1...4, in: "g")
        let result = try await store.enqueue(F.request("r1", groups: ["g"], at: 1))
        let first = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(2), leaseDuration: F.lease, chunkSize: 2),
            "first chunk"
        )
        try expectEqual(try await F.deliver(first, store: store, now: F.at(2)), [1, 2].map(F.token), "first chunk")
        _ = try await store.invalidate(
            app: F.app,
            token: F.token(1),
            reason: .unregistered,
            appleTimestamp: F.at(1),
            at: F.at(3)
        )
        _ = try await store.removeDevice(app: F.app, token: F.token(2))
        try expectEqual(try await F.deliverAll(store, now: F.at(4)), [3, 4].map(F.token), "the rest")
        let report = try unwrap(try await store.report(result.id), "report")
        try expectEqual(report.accepted, 4, "accepted")
        try expectEqual(report.skipped, 0, "nothing skipped")
        try expectBalanced(report, "changes after the read")
    }
}
