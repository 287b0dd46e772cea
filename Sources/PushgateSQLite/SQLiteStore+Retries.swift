public import Foundation
import GRDB
public import PushgateCore

/// Retries: due rows leased earliest first, and their outcomes written in one transaction.
extension SQLiteStore {
    public func claimRetries(
        owner: InstanceID,
        now: Date,
        leaseDuration: Duration,
        limit: Int
    ) async throws
        -> [RetryClaim]
    {
        guard limit > 0 else { throw StoreError.invalidArgument("limit must be positive (got \(limit))") }
        let nowMs = Millis.from(now)
        let leaseUntil = nowMs + leaseDuration.milliseconds
        return try await write { db in
            _ = try Self.expireOverdue(nowMs: nowMs, in: db)
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT t.request_seq, r.id, t.token, t.attempt, t.last_reason, t.generation
                    FROM retry t JOIN request r ON r.seq = t.request_seq
                    WHERE t.next_attempt_at <= ? AND t.lease_expires_at <= ?
                    ORDER BY t.next_attempt_at, t.request_seq, t.token LIMIT ?
                    """,
                arguments: [nowMs, nowMs, limit]
            )
            let lease = try db.cachedStatement(
                sql:
                    "UPDATE retry SET owner = ?, lease_expires_at = ?, generation = ? WHERE request_seq = ? AND token = ?"
            )
            var claims = [RetryClaim]()
            claims.reserveCapacity(rows.count)
            for row in rows {
                let generation: Int64 = row[5] + 1
                let token: String = row[2]
                try lease.execute(arguments: [owner.value, leaseUntil, generation, row[0] as Int64, token])
                claims.append(
                    RetryClaim(
                        requestID: try StoredForm.requestID(row[1]),
                        token: try StoredForm.deviceToken(token),
                        attempt: row[3],
                        lastReason: row[4],
                        leaseGeneration: generation,
                        leaseExpiresAt: Millis.date(leaseUntil)
                    )
                )
            }
            return claims
        }
    }

    public func recordRetryOutcomes(
        _ outcomes: [RetryOutcome],
        owner: InstanceID,
        now: Date
    ) async throws
        -> RetryRecordResult
    {
        guard !outcomes.isEmpty else { return RetryRecordResult(applied: 0, leaseLost: []) }
        let nowMs = Millis.from(now)
        return try await write { db in
            var requests = [RequestID: (seq: Int64, app: String)]()
            var touched = Set<Int64>()
            var applied = 0
            var lost = [RetryClaim]()
            let holderStatement = try db.cachedStatement(
                sql: "SELECT owner, generation FROM retry WHERE request_seq = ? AND token = ?"
            )
            let delete = try db.cachedStatement(sql: "DELETE FROM retry WHERE request_seq = ? AND token = ?")
            let reschedule = try db.cachedStatement(
                sql: """
                    UPDATE retry SET attempt = ?, next_attempt_at = ?, last_reason = ?, owner = NULL,
                        lease_expires_at = 0
                    WHERE request_seq = ? AND token = ?
                    """
            )
            for outcome in outcomes {
                let claim = outcome.claim
                let request: (seq: Int64, app: String)
                if let known = requests[claim.requestID] {
                    request = known
                } else if let row = try Row.fetchOne(
                    db,
                    sql: "SELECT seq, app FROM request WHERE id = ?",
                    arguments: [claim.requestID.value]
                ) {
                    request = (row[0], row[1])
                    requests[claim.requestID] = request
                } else {
                    lost.append(claim)
                    continue
                }
                guard let holder = try Row.fetchOne(holderStatement, arguments: [request.seq, claim.token.storageKey]),
                    holder[0] as String? == owner.value, holder[1] as Int64 == claim.leaseGeneration
                else {
                    lost.append(claim)
                    continue
                }
                switch outcome.result {
                case .accepted(let apnsID):
                    try delete.execute(arguments: [request.seq, claim.token.storageKey])
                    try Self.recordAccepted(1, apnsID: apnsID, requestSeq: request.seq, in: db)
                case .failed(let reason, let status):
                    try delete.execute(arguments: [request.seq, claim.token.storageKey])
                    try Self.recordFailures(
                        [FailureEntry(token: claim.token, reason: reason, status: status, at: now)],
                        requestSeq: request.seq,
                        in: db
                    )
                case .retry(let nextAttemptAt, let reason):
                    try reschedule.execute(arguments: [
                        claim.attempt + 1, Millis.from(nextAttemptAt), reason, request.seq, claim.token.storageKey,
                    ])
                }
                if let invalidation = outcome.invalidation {
                    _ = try Self.invalidate(app: request.app, invalidation, at: now, in: db)
                }
                touched.insert(request.seq)
                applied += 1
            }
            for seq in touched.sorted() { try Self.finishIfDone(requestSeq: seq, nowMs: nowMs, in: db) }
            return RetryRecordResult(applied: applied, leaseLost: lost)
        }
    }
}
