import Foundation
import PushgateCore

enum RetryChecks {
    typealias F = Fixture

    /// Three devices; the second answers 429 and is due again at 10 s.
    private static func requestWithOneRetry(
        _ store: any PushStore,
        expiration: Expiration = .immediately
    ) async throws
        -> RequestID
    {
        try await F.register(store, 1...3, in: "g")
        let id = try await store.enqueue(F.request("r1", groups: ["g"], expiration: expiration)).id
        try await F.deliverAll(store, now: F.at(1)) { token in
            token == F.token(2) ? .retry("TooManyRequests", nextAttemptAt: F.at(10)) : .accept
        }
        return id
    }

    static func dueRetriesAreClaimedWithLeases(_ store: any PushStore) async throws {
        let id = try await requestWithOneRetry(store)
        let report = try unwrap(try await store.report(id), "report")
        try expectEqual(report.pendingRetries, 1, "pending retries")
        try expectEqual(report.state, .sending, "state while a retry is pending")
        try expectEqual(
            try await store.claimRetries(owner: F.instanceA, now: F.at(9), leaseDuration: F.lease, limit: 10),
            [],
            "not before it is due"
        )
        let claims = try await store.claimRetries(owner: F.instanceA, now: F.at(10), leaseDuration: F.lease, limit: 10)
        try expectEqual(claims.count, 1, "claimed when due")
        let claim = claims[0]
        try expectEqual(claim.requestID, id, "request")
        try expectEqual(claim.token, F.token(2), "token")
        try expectEqual(claim.attempt, 1, "attempts so far")
        try expectEqual(claim.lastReason, "TooManyRequests", "last reason")
        try expectEqual(claim.leaseExpiresAt, F.at(40), "lease end")
        try expectEqual(
            try await store.claimRetries(owner: F.instanceB, now: F.at(11), leaseDuration: F.lease, limit: 10),
            [],
            "not while leased"
        )
        let again = try await store.claimRetries(owner: F.instanceB, now: F.at(40), leaseDuration: F.lease, limit: 10)
        try expectEqual(again.map(\.token), [F.token(2)], "claimable again once the lease ends")
        try expect(again[0].leaseGeneration != claim.leaseGeneration, "with a new lease generation")
    }

    static func retryOutcomeWithLostLeaseIsRefused(_ store: any PushStore) async throws {
        let id = try await requestWithOneRetry(store)
        let stale = try await store.claimRetries(owner: F.instanceA, now: F.at(10), leaseDuration: F.lease, limit: 10)[
            0
        ]
        let current = try await store.claimRetries(
            owner: F.instanceB,
            now: F.at(45),
            leaseDuration: F.lease,
            limit: 10
        )[0]
        let refused = try await store.recordRetryOutcomes(
            [RetryOutcome(claim: stale, result: .accepted(apnsID: nil))],
            owner: F.instanceA,
            now: F.at(46)
        )
        try expectEqual(refused, RetryRecordResult(applied: 0, leaseLost: [stale]), "A's late outcome")
        try expectEqual(try await store.report(id)?.accepted, 2, "nothing written for it")
        let accepted = try await store.recordRetryOutcomes(
            [RetryOutcome(claim: current, result: .accepted(apnsID: "a-1"))],
            owner: F.instanceB,
            now: F.at(46)
        )
        try expectEqual(accepted, RetryRecordResult(applied: 1, leaseLost: []), "B's outcome")
        let report = try unwrap(try await store.report(id), "report")
        try expectEqual(report.accepted, 3, "accepted")
        try expectEqual(report.pendingRetries, 0, "pending")
        try expectEqual(report.state, .done, "state")
        try expectEqual(report.lastAPNsID, "a-1", "last apns-id")
    }

    static func rescheduledRetryWaitsForItsNextAttempt(_ store: any PushStore) async throws {
        let id = try await requestWithOneRetry(store)
        let claim = try await store.claimRetries(owner: F.instanceA, now: F.at(10), leaseDuration: F.lease, limit: 10)[
            0
        ]
        _ = try await store.recordRetryOutcomes(
            [RetryOutcome(claim: claim, result: .retry(nextAttemptAt: F.at(100), reason: "ServiceUnavailable"))],
            owner: F.instanceA,
            now: F.at(11)
        )
        try expectEqual(
            try await store.claimRetries(owner: F.instanceA, now: F.at(99), leaseDuration: F.lease, limit: 10),
            [],
            "not before the new due time, though the lease was given back"
        )
        let next = try await store.claimRetries(owner: F.instanceA, now: F.at(100), leaseDuration: F.lease, limit: 10)
        try expectEqual(next.map(\.attempt), [2], "attempts so far")
        try expectEqual(next.map(\.lastReason), ["ServiceUnavailable"], "last reason")
        try expectEqual(try await store.report(id)?.pendingRetries, 1, "still pending")
    }

    static func releasedRetryLeasesAreClaimableAtOnce(_ store: any PushStore) async throws {
        _ = try await requestWithOneRetry(store)
        let stale = try await store.claimRetries(owner: F.instanceA, now: F.at(10), leaseDuration: F.lease, limit: 10)[
            0
        ]
        try expectEqual(try await store.releaseLeases(owner: F.instanceA, now: F.at(11)), 1, "released")
        let claims = try await store.claimRetries(owner: F.instanceA, now: F.at(11), leaseDuration: F.lease, limit: 10)
        try expectEqual(claims.map(\.token), [F.token(2)], "claimable at once")
        let refused = try await store.recordRetryOutcomes(
            [RetryOutcome(claim: stale, result: .accepted(apnsID: nil))],
            owner: F.instanceA,
            now: F.at(12)
        )
        try expectEqual(refused.leaseLost, [stale], "the released claim's outcome is refused")
    }

    static func retryClaimsRespectTheLimitEarliestFirst(_ store: any PushStore) async throws {
        try await F.register(store, 1...5, in: "g")
        _ = try await store.enqueue(F.request("r1", groups: ["g"]))
        try await F.deliverAll(store, now: F.at(1)) { token in
            .retry("ServiceUnavailable", nextAttemptAt: F.at(100 - Int(token.bytes.last!)))
        }
        let first = try await store.claimRetries(owner: F.instanceA, now: F.at(200), leaseDuration: F.lease, limit: 2)
        try expectEqual(first.map(\.token), [F.token(5), F.token(4)], "the two due earliest")
        let rest = try await store.claimRetries(owner: F.instanceB, now: F.at(200), leaseDuration: F.lease, limit: 10)
        try expectEqual(rest.map(\.token), [F.token(3), F.token(2), F.token(1)], "the others, to another instance")
    }

    static func requestIsDoneWhenAllChunksAndRetriesAreDone(_ store: any PushStore) async throws {
        try await F.register(store, 1...4, in: "g")
        let id = try await store.enqueue(F.request("r1", groups: ["g"])).id
        let first = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(1), leaseDuration: F.lease, chunkSize: 2),
            "first chunk"
        )
        _ = try await F.deliver(first, store: store, now: F.at(1)) { token in
            token == F.token(1) ? .retry("InternalServerError", nextAttemptAt: F.at(5)) : .accept
        }
        try expectEqual(try await store.report(id)?.state, .sending, "one chunk left")
        let second = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(2), leaseDuration: F.lease, chunkSize: 2),
            "second chunk"
        )
        _ = try await F.deliver(second, store: store, now: F.at(2))
        try expectEqual(
            try await store.claimChunk(owner: F.instanceA, now: F.at(2), leaseDuration: F.lease, chunkSize: 2),
            nil,
            "all chunks cut"
        )
        var report = try unwrap(try await store.report(id), "report")
        try expectEqual(report.state, .sending, "a retry is still pending")
        try expectEqual(report.finishedAt, nil, "not finished")
        let claim = try await store.claimRetries(owner: F.instanceA, now: F.at(5), leaseDuration: F.lease, limit: 10)[0]
        _ = try await store.recordRetryOutcomes(
            [RetryOutcome(claim: claim, result: .failed(reason: "BadDeviceToken", status: 400))],
            owner: F.instanceA,
            now: F.at(6)
        )
        report = try unwrap(try await store.report(id), "report")
        try expectEqual(report.state, .done, "done")
        try expectEqual(report.finishedAt, F.at(6), "finished with its last outcome")
        try expectEqual(report.accepted, 3, "accepted")
        try expectEqual(report.failedByReason, ["BadDeviceToken": 1], "failed")
    }

    static func expiredRequestRecordsPendingRetriesAsFailed(_ store: any PushStore) async throws {
        let id = try await requestWithOneRetry(
            store,
            expiration: .at(epochSeconds: Int64(F.at(60).timeIntervalSince1970))
        )
        try expectEqual(try await store.expireOverdue(now: F.at(60)), [], "not at its expiration time")
        try expectEqual(try await store.expireOverdue(now: F.at(61)), [id], "past it")
        let report = try unwrap(try await store.report(id), "report")
        try expectEqual(report.state, .expired, "state")
        try expectEqual(report.finishedAt, F.at(61), "finishedAt")
        try expectEqual(report.failedByReason, [FailureEntry.expiredReason: 1], "failed by reason")
        try expectEqual(report.pendingRetries, 0, "no retry left")
        try expectEqual(report.accepted, 2, "accepted")
        let failures = try await store.failures(of: id, after: nil, limit: 10)
        try expectEqual(failures.map(\.token), [F.token(2)], "failure rows")
        try expectEqual(failures.map(\.reason), [FailureEntry.expiredReason], "reason")
        try expectEqual(
            try await store.claimRetries(owner: F.instanceA, now: F.at(61), leaseDuration: F.lease, limit: 10),
            [],
            "nothing to retry"
        )
        try expectEqual(try await store.expireOverdue(now: F.at(62)), [], "expires once")
    }

    static func expiredRequestCountsUnsentTargetsAndClosesItsChunks(_ store: any PushStore) async throws {
        try await F.register(store, 1...10, in: "g")
        let id = try await store.enqueue(
            F.request("r1", groups: ["g"], expiration: .at(epochSeconds: Int64(F.at(60).timeIntervalSince1970)))
        ).id
        let chunk = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(1), leaseDuration: F.lease, chunkSize: 4),
            "claim"
        )
        _ = try await F.deliver(chunk, store: store, now: F.at(1), pageSize: 2, maximumPages: 1)
        // Claims expire overdue requests too.
        try expectEqual(
            try await store.claimChunk(owner: F.instanceB, now: F.at(61), leaseDuration: F.lease, chunkSize: 4),
            nil,
            "no work left once expired"
        )
        let report = try unwrap(try await store.report(id), "report")
        try expectEqual(report.state, .expired, "state")
        try expectEqual(report.accepted, 2, "accepted")
        try expectEqual(report.failedByReason, [FailureEntry.expiredReason: 8], "unsent targets counted as expired")
        try expectEqual(
            try await store.recordProgress(
                ChunkProgress(chunk: chunk, through: chunk.through, accepted: 2, completesChunk: true),
                owner: F.instanceA,
                now: F.at(62),
                leaseDuration: F.lease
            ),
            .leaseLost,
            "the expired request's chunk is closed"
        )
    }

    static func requestsWithoutExpirationTimeNeverExpire(_ store: any PushStore) async throws {
        try await F.register(store, 1...2, in: "g")
        var ids = [RequestID]()
        for (name, expiration) in [("once", Expiration.immediately), ("policy", Expiration.storagePolicy)] {
            ids.append(try await store.enqueue(F.request(name, groups: ["g"], expiration: expiration)).id)
        }
        try await F.deliverAll(store, now: F.at(1)) { _ in .retry("ServiceUnavailable", nextAttemptAt: F.at(5)) }
        try expectEqual(try await store.expireOverdue(now: F.at(1_000_000)), [], "nothing expires")
        for id in ids {
            try expectEqual(try await store.report(id)?.state, .sending, "\(id) still sending")
        }
    }

    static func nextWakeUpIsTheEarliestPendingWork(_ store: any PushStore) async throws {
        try expectEqual(try await store.nextWakeUp(after: F.at(0)), nil, "an empty ledger")
        try await F.register(store, 1...2, in: "g")
        _ = try await store.enqueue(
            F.request("r1", groups: ["g"], expiration: .at(epochSeconds: Int64(F.at(1000).timeIntervalSince1970)))
        )
        let first = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(0), leaseDuration: F.lease, chunkSize: 1),
            "first"
        )
        _ = try await F.deliver(first, store: store, now: F.at(0)) { _ in
            .retry("TooManyRequests", nextAttemptAt: F.at(10))
        }
        _ = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(0), leaseDuration: F.lease, chunkSize: 1),
            "second"
        )
        try expectEqual(try await store.nextWakeUp(after: F.at(0)), F.at(10), "the retry due at 10 s")
        _ = try await store.claimRetries(owner: F.instanceA, now: F.at(10), leaseDuration: F.lease, limit: 10)
        try expectEqual(
            try await store.nextWakeUp(after: F.at(10)),
            F.at(30),
            "the second chunk's lease, before the retry's (40 s)"
        )
    }
}
