import Foundation
import PushgateCore

/// The report split by service (``DeliveryReport/byService``): targets counted by service when the request
/// is stored, accepted and skipped with each progress record and retry outcome, failures by service, each
/// adding up to its total, while the request is under way and once it is done or expired.
enum ServiceSplitChecks {
    typealias F = Fixture

    static func split(_ report: DeliveryReport) throws -> ServiceSplit {
        let split = try unwrap(report.byService, "a request stored by this release has the split")
        try expectEqual(split.targets.total, report.targets, "targets by service add up (\(split))")
        try expectEqual(split.accepted.total, report.accepted, "accepted by service add up (\(split))")
        try expectEqual(split.failed.total, report.failed, "failed by service add up (\(split))")
        try expectEqual(split.skipped.total, report.skipped, "skipped by service add up (\(split))")
        return split
    }

    /// APNs, FCM and browser devices in one group: a device of each service accepted, an APNs device
    /// failed, a browser invalidated and an FCM device removed after the request was stored (skipped), a
    /// browser retried and then accepted.
    static func reportIsSplitByService(_ store: any PushStore) async throws {
        try await F.register(store, 1...3, in: "g")
        for token in [F.fcmToken(11), F.fcmToken(12), F.subscription(21), F.subscription(22), F.subscription(23)] {
            _ = try await F.register(store, token, in: "g")
        }
        let result = try await store.enqueue(F.request("split", groups: ["g"], devices: [F.fcmToken(13)], at: 1))
        let queued = try split(try unwrap(try await store.report(result.id), "report"))
        try expectEqual(queued.targets, ServiceCounts(apns: 3, fcm: 3, webpush: 3), "targets by service")
        try expectEqual(queued.accepted, .zero, "nothing accepted yet")

        _ = try await store.invalidate(
            app: F.app,
            token: F.subscription(22),
            reason: .unregistered,
            appleTimestamp: nil,
            at: F.at(2)
        )
        try expect(try await store.removeDevice(app: F.app, token: F.fcmToken(12)), "FCM device 12 removed")
        try await F.deliverAll(store, now: F.at(3), pageSize: 2) { token in
            if token == F.token(3) { return .reject("BadDeviceToken", status: 400) }
            if token == F.subscription(23) { return .retry("webpush_429", nextAttemptAt: F.at(10)) }
            return .accept
        }
        let sending = try unwrap(try await store.report(result.id), "report")
        try expectEqual(sending.state, .sending, "a retry is pending")
        let underWay = try split(sending)
        try expectEqual(underWay.accepted, ServiceCounts(apns: 2, fcm: 2, webpush: 1), "accepted by service")
        try expectEqual(underWay.failed, ServiceCounts(apns: 1), "failed by service")
        try expectEqual(underWay.skipped, ServiceCounts(fcm: 1, webpush: 1), "skipped by service")

        let claims = try await store.claimRetries(owner: F.instanceA, now: F.at(10), leaseDuration: F.lease, limit: 10)
        try expectEqual(claims.map(\.token), [F.subscription(23)], "the browser's retry")
        _ = try await store.recordRetryOutcomes(
            claims.map { RetryOutcome(claim: $0, result: .accepted(apnsID: nil)) },
            owner: F.instanceA,
            now: F.at(10)
        )
        let report = try unwrap(try await store.report(result.id), "report")
        try SkipChecks.expectBalanced(report, "split by service")
        let done = try split(report)
        try expectEqual(done.accepted, ServiceCounts(apns: 2, fcm: 2, webpush: 2), "the retry counts for Web Push")
        try expectEqual(done.failed, ServiceCounts(apns: 1), "failed by service, done")
        try expectEqual(done.skipped, ServiceCounts(fcm: 1, webpush: 1), "skipped by service, done")
        for platform in PushPlatform.allCases {
            try expectEqual(
                done.targets[platform],
                done.accepted[platform] + done.failed[platform] + done.skipped[platform],
                "\(platform): targets = accepted + failed + skipped"
            )
        }
    }

    /// An FCM failure retried and failed for good counts as FCM's, and a request that expires with
    /// targets never sent counts them as failed by their service.
    static func expiredTargetsFailByService(_ store: any PushStore) async throws {
        try await F.register(store, 1...2, in: "g")
        _ = try await F.register(store, F.fcmToken(11), in: "g")
        _ = try await F.register(store, F.subscription(21), in: "g")
        let result = try await store.enqueue(
            F.request("expiring", groups: ["g"], expiration: .at(epochSeconds: Int64(F.at(50).timeIntervalSince1970)))
        )
        let chunk = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(1), leaseDuration: F.lease, chunkSize: 10),
            "chunk"
        )
        let page = try await store.targets(of: chunk, after: chunk.progress, limit: 3)
        try expectEqual(page.targets.map(\.token), [F.token(1), F.token(2), F.fcmToken(11)], "the first page")
        _ = try await store.recordProgress(
            ChunkProgress(
                chunk: chunk,
                through: page.scannedThrough,
                accepted: 1,
                retries: [RetryEntry(token: F.fcmToken(11), attempt: 1, nextAttemptAt: F.at(5), reason: "UNAVAILABLE")],
                failures: [FailureEntry(token: F.token(2), reason: "BadDeviceToken", status: 400, at: F.at(1))],
                acceptedByService: ServiceCounts(apns: 1)
            ),
            owner: F.instanceA,
            now: F.at(1),
            leaseDuration: F.lease
        )
        let claims = try await store.claimRetries(owner: F.instanceA, now: F.at(5), leaseDuration: F.lease, limit: 10)
        _ = try await store.recordRetryOutcomes(
            claims.map { RetryOutcome(claim: $0, result: .failed(reason: "UNAVAILABLE", status: 503)) },
            owner: F.instanceA,
            now: F.at(5)
        )
        let underWay = try split(try unwrap(try await store.report(result.id), "report"))
        try expectEqual(underWay.failed, ServiceCounts(apns: 1, fcm: 1), "failed by service, under way")
        try expectEqual(try await store.expireOverdue(now: F.at(60)), [result.id], "expired")
        let report = try unwrap(try await store.report(result.id), "report")
        try expectEqual(report.state, .expired, "expired")
        try SkipChecks.expectBalanced(report, "expired, split by service")
        let expired = try split(report)
        try expectEqual(expired.accepted, ServiceCounts(apns: 1), "accepted by service")
        try expectEqual(expired.failed, ServiceCounts(apns: 1, fcm: 1, webpush: 1), "the browser never sent: failed")
    }
}
