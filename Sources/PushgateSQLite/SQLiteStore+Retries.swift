import Foundation
import GRDB
public import PushgateCore

/// Retries: due rows leased earliest first, and their outcomes written in one transaction.
extension SQLiteStore {
    /// The steps of ``RetryLeasing``, each with its statements.
    public func claimRetries(_ lease: LeaseWindow, limit: Int) async throws -> [RetryClaim] {
        let limit = try StoreError.positive(limit)
        return try await write { db in
            var claim = RetryLeasing(lease, limit: limit)
            var action = claim.start()
            while true {
                switch action {
                case .expireOverdue:
                    _ = try Self.expireOverdue(nowMs: lease.nowMillis, in: db)
                    action = claim.overdueExpired()
                case .leaseDue(let limit):
                    action = try claim.leased(try Self.leaseDueRetries(lease, limit: limit, in: db))
                case .claimed(let claims):
                    return claims
                }
            }
        }
    }

    /// The due retry rows, earliest first, leased to `lease.owner`.
    private static func leaseDueRetries(
        _ lease: LeaseWindow,
        limit: Int,
        in db: Database
    ) throws
        -> [RetryLeasing.Leased]
    {
        let rows = try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT t.request_seq, r.id, t.token, t.attempt, t.last_reason, t.generation, t.next_attempt_at
                    FROM retry t JOIN request r ON r.seq = t.request_seq
                    WHERE t.next_attempt_at <= ? AND t.lease_expires_at <= ?
                    ORDER BY t.next_attempt_at, t.request_seq, t.token LIMIT ?
                    """
            ),
            arguments: [lease.nowMillis, lease.nowMillis, limit]
        )
        let take = try db.cachedStatement(
            sql: "UPDATE retry SET owner = ?, lease_expires_at = ?, generation = ? WHERE request_seq = ? AND token = ?"
        )
        return try rows.map { row in
            let claimed: StoredForm.ClaimedRetry = (row[1], row[2], row[3], row[4], row[5] + 1)
            try take.execute(arguments: [
                lease.owner.value, lease.expiresAtMillis, claimed.generation, row[0] as Int64, claimed.token,
            ])
            return (nextAttemptAt: row[6], seq: row[0], row: claimed)
        }
    }

    /// Reads each outcome's request and retry row (statements prepared once), then writes what
    /// ``RetryOutcomePlan`` lists.
    public func recordRetryOutcomes(_ batch: RetryOutcomeBatch) async throws -> RetryRecordResult {
        if batch.outcomes.isEmpty { return RetryRecordResult(applied: 0, leaseLost: []) }
        return try await write { db in
            let requests = try Self.requests(of: batch, in: db)
            let holders = try Self.holders(of: batch, requests, in: db)
            let plan = RetryOutcomePlan(batch, requests: requests, holders: holders)
            let delete = try db.cachedStatement(sql: "DELETE FROM retry WHERE request_seq = ? AND token = ?")
            for key in plan.removed { try delete.execute(arguments: [key.seq, key.token]) }
            let reschedule = try db.cachedStatement(
                sql: """
                    UPDATE retry SET attempt = ?, next_attempt_at = ?, last_reason = ?, owner = NULL,
                        lease_expires_at = 0
                    WHERE request_seq = ? AND token = ?
                    """
            )
            for retry in plan.rescheduled {
                try reschedule.execute(arguments: [
                    retry.attempt, retry.nextAttemptAt, retry.reason, retry.key.seq, retry.key.token,
                ])
            }
            for (seq, accepted) in plan.accepted {
                try Self.recordAccepted(
                    Int(accepted.count),
                    byService: accepted.byService,
                    apnsID: accepted.apnsID,
                    requestSeq: seq,
                    in: db
                )
            }
            for (seq, entries) in plan.failures { try Self.recordFailures(entries, requestSeq: seq, in: db) }
            for (app, invalidation) in plan.invalidations {
                _ = try Self.invalidate(app: app, invalidation, at: batch.now, in: db)
            }
            for seq in plan.touchedRequests { try Self.finishIfDone(requestSeq: seq, nowMs: batch.nowMillis, in: db) }
            return plan.result
        }
    }

    private static func requests(
        of batch: RetryOutcomeBatch,
        in db: Database
    ) throws -> [RequestID: RetryOutcomePlan.Request] {
        let select = try db.cachedStatement(sql: "SELECT seq, app FROM request WHERE id = ?")
        var requests = [RequestID: RetryOutcomePlan.Request]()
        for id in Set(batch.outcomes.map(\.claim.requestID)) {
            if let row = try Row.fetchOne(select, arguments: [id.value]) { requests[id] = (row[0], row[1]) }
        }
        return requests
    }

    private static func holders(
        of batch: RetryOutcomeBatch,
        _ requests: [RequestID: RetryOutcomePlan.Request],
        in db: Database
    ) throws -> [RetryOutcomePlan.Key: RetryOutcomePlan.Holder] {
        let select = try db.cachedStatement(
            sql: "SELECT owner, generation FROM retry WHERE request_seq = ? AND token = ?"
        )
        var holders = [RetryOutcomePlan.Key: RetryOutcomePlan.Holder]()
        for claim in batch.outcomes.map(\.claim) {
            guard let request = requests[claim.requestID] else { continue }
            let key = RetryOutcomePlan.Key(seq: request.seq, token: claim.token.storageKey)
            if holders[key] == nil, let row = try Row.fetchOne(select, arguments: [key.seq, key.token]) {
                holders[key] = (row[0], row[1])
            }
        }
        return holders
    }
}
