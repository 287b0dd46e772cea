import Foundation
import Logging
import PostgresNIO
public import PushgateCore

/// Retries: rows claimed with `FOR UPDATE SKIP LOCKED`, earliest first, and their outcomes written with one
/// statement per kind (removed, rescheduled, failed) for the whole batch.
extension PostgresStore {
    /// The steps of ``RetryLeasing``, each with its statements.
    public func claimRetries(_ lease: LeaseWindow, limit: Int) async throws -> [RetryClaim] {
        let limit = try StoreError.positive(limit)
        return try await transaction { connection in
            var claim = RetryLeasing(lease, limit: limit)
            var action = claim.start()
            while true {
                switch action {
                case .expireOverdue:
                    _ = try await Self.expireOverdue(nowMs: lease.nowMillis, on: connection, logger: logger)
                    action = claim.overdueExpired()
                case .leaseDue(let limit):
                    action = try claim.leased(try await leaseDueRetries(lease, limit: limit, on: connection))
                case .claimed(let claims):
                    return claims
                }
            }
        }
    }

    /// The due retry rows, leased to `lease.owner`, skipping rows locked; in no particular order
    /// (`UPDATE … RETURNING` keeps none).
    private func leaseDueRetries(
        _ lease: LeaseWindow,
        limit: Int,
        on connection: PostgresConnection
    ) async throws
        -> [RetryLeasing.Leased]
    {
        let (owner, nowMs, leaseUntil) = (lease.owner.value, lease.nowMillis, lease.expiresAtMillis)
        return try await connection.all(
            """
            WITH due AS (
                SELECT request_seq, token FROM retry
                WHERE next_attempt_at <= \(nowMs) AND lease_expires_at <= \(nowMs)
                ORDER BY next_attempt_at, request_seq, token LIMIT \(Int64(limit))
                FOR UPDATE SKIP LOCKED
            )
            UPDATE retry t SET owner = \(owner), lease_expires_at = \(leaseUntil), generation = t.generation + 1
            FROM due, request r
            WHERE t.request_seq = due.request_seq AND t.token = due.token AND r.seq = t.request_seq
            RETURNING t.next_attempt_at, t.request_seq, t.token, r.id, t.attempt, t.last_reason, t.generation
            """,
            as: (Int64, Int64, String, String, Int64, String, Int64).self,
            logger: logger
        ).map { row in (nextAttemptAt: row.0, seq: row.1, row: (row.3, row.2, row.4, row.5, row.6)) }
    }

    /// Locks the batch's requests, then its retry rows, and writes what ``RetryOutcomePlan`` lists with
    /// one statement per kind for the whole batch.
    public func recordRetryOutcomes(_ batch: RetryOutcomeBatch) async throws -> RetryRecordResult {
        if batch.outcomes.isEmpty { return RetryRecordResult(applied: 0, leaseLost: []) }
        return try await transaction { connection in
            // The requests first, in seq order, then their retry rows: the lock order of every ledger
            // transaction (`finishIfDone` below needs them exclusive anyway).
            var requests = [RequestID: RetryOutcomePlan.Request]()
            for (id, seq, app) in try await connection.all(
                """
                SELECT id, seq, app FROM request
                WHERE id = ANY(\(Array(Set(batch.outcomes.map(\.claim.requestID.value))))::TEXT[])
                ORDER BY seq FOR UPDATE
                """,
                as: (String, Int64, String).self,
                logger: logger
            ) {
                requests[try StoredForm.requestID(id)] = (seq, app)
            }
            let keys = batch.outcomes.compactMap { outcome in
                requests[outcome.claim.requestID].map {
                    RetryOutcomePlan.Key(seq: $0.seq, token: outcome.claim.token.storageKey)
                }
            }.sorted { ($0.seq, $0.token) < ($1.seq, $1.token) }
            var holders = [RetryOutcomePlan.Key: RetryOutcomePlan.Holder]()
            for (seq, token, holder, generation) in try await connection.all(
                """
                SELECT t.request_seq, t.token, t.owner, t.generation FROM retry t
                JOIN unnest(\(keys.map(\.seq))::BIGINT[], \(keys.map(\.token))::TEXT[]) AS k(seq, token)
                  ON t.request_seq = k.seq AND t.token = k.token
                ORDER BY t.request_seq, t.token
                FOR UPDATE OF t
                """,
                as: (Int64, String, String?, Int64).self,
                logger: logger
            ) {
                holders[RetryOutcomePlan.Key(seq: seq, token: token)] = (holder, generation)
            }
            let plan = RetryOutcomePlan(batch, requests: requests, holders: holders)
            try await Self.write(plan, at: batch.now, on: connection, logger: logger)
            if !plan.rescheduled.isEmpty { try await notifyWork(on: connection) }
            return plan.result
        }
    }

    // MARK: - Inside transactions

    private static func write(
        _ plan: RetryOutcomePlan,
        at now: Date,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        let nowMs = Millis.from(now)
        let (removed, rescheduled) = (plan.removed, plan.rescheduled)
        if !removed.isEmpty {
            try await connection.run(
                """
                DELETE FROM retry t USING unnest(\(removed.map(\.seq))::BIGINT[], \(removed.map(\.token))::TEXT[]) AS k(seq, token)
                WHERE t.request_seq = k.seq AND t.token = k.token
                """,
                logger: logger
            )
        }
        if !rescheduled.isEmpty {
            try await connection.run(
                """
                UPDATE retry t SET attempt = k.attempt, next_attempt_at = k.next, last_reason = k.reason, owner = NULL,
                    lease_expires_at = 0
                FROM unnest(\(rescheduled.map(\.key.seq))::BIGINT[], \(rescheduled.map(\.key.token))::TEXT[],
                            \(rescheduled.map(\.attempt))::BIGINT[], \(rescheduled.map(\.nextAttemptAt))::BIGINT[],
                            \(rescheduled.map(\.reason))::TEXT[]) AS k(seq, token, attempt, next, reason)
                WHERE t.request_seq = k.seq AND t.token = k.token
                """,
                logger: logger
            )
        }
        for (seq, entry) in plan.accepted {
            try await connection.run(
                """
                UPDATE request SET accepted = accepted + \(entry.count),
                    fcm_accepted = fcm_accepted + \(Int64(entry.byService.fcm)),
                    webpush_accepted = webpush_accepted + \(Int64(entry.byService.webpush)),
                    last_apns_id = COALESCE(\(entry.apnsID), last_apns_id),
                    last_apns_at = CASE WHEN \(entry.apnsID)::TEXT IS NULL THEN last_apns_at ELSE \(nowMs) END
                WHERE seq = \(seq)
                """,
                logger: logger
            )
        }
        for (seq, entries) in plan.failures {
            try await recordFailures(entries, requestSeq: seq, on: connection, logger: logger)
        }
        for (app, invalidation) in plan.invalidations {
            _ = try await invalidate(app: app, invalidation, at: now, on: connection, logger: logger)
        }
        for seq in plan.touchedRequests {
            try await finishIfDone(requestSeq: seq, nowMs: nowMs, on: connection, logger: logger)
        }
    }

    /// Upserts retry rows (unleased), one statement. A token repeated in the batch keeps its last entry.
    static func scheduleRetries(
        _ retries: [RetryEntry],
        requestSeq: Int64,
        on connection: PostgresConnection,
        logger: Logger
    )
        async throws
    {
        var latest = [String: RetryEntry]()
        for retry in retries { latest[retry.token.storageKey] = retry }
        let entries = latest.sorted { $0.key < $1.key }
        try await connection.run(
            """
            INSERT INTO retry (request_seq, token, attempt, next_attempt_at, last_reason)
            SELECT \(requestSeq), r.token, r.attempt, r.next_attempt_at, r.reason
            FROM unnest(\(entries.map(\.key))::TEXT[], \(entries.map { Int64($0.value.attempt) })::BIGINT[],
                        \(entries.map { Millis.from($0.value.nextAttemptAt) })::BIGINT[], \(entries.map(\.value.reason))::TEXT[])
                AS r(token, attempt, next_attempt_at, reason)
            ON CONFLICT (request_seq, token) DO UPDATE SET
                attempt = excluded.attempt, next_attempt_at = excluded.next_attempt_at,
                last_reason = excluded.last_reason, owner = NULL, lease_expires_at = 0
            """,
            logger: logger
        )
    }
}
