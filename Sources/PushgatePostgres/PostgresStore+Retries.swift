public import Foundation
import Logging
import PostgresNIO
public import PushgateCore

/// Retries: rows claimed with `FOR UPDATE SKIP LOCKED`, earliest first, and their outcomes written with one
/// statement per kind (removed, rescheduled, failed) for the whole batch.
extension PostgresStore {
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
        return try await transaction { connection in
            _ = try await Self.expireOverdue(nowMs: nowMs, on: connection, logger: logger)
            let rows = try await connection.all(
                """
                WITH due AS (
                    SELECT request_seq, token FROM retry
                    WHERE next_attempt_at <= \(nowMs) AND lease_expires_at <= \(nowMs)
                    ORDER BY next_attempt_at, request_seq, token LIMIT \(Int64(limit))
                    FOR UPDATE SKIP LOCKED
                )
                UPDATE retry t SET owner = \(owner.value), lease_expires_at = \(leaseUntil), generation = t.generation + 1
                FROM due, request r
                WHERE t.request_seq = due.request_seq AND t.token = due.token AND r.seq = t.request_seq
                RETURNING t.next_attempt_at, t.request_seq, t.token, r.id, t.attempt, t.last_reason, t.generation
                """,
                as: (Int64, Int64, String, String, Int64, String, Int64).self,
                logger: logger
            )
            return try rows.sorted { ($0.0, $0.1, $0.2) < ($1.0, $1.1, $1.2) }.map { row in
                RetryClaim(
                    requestID: try StoredForm.requestID(row.3),
                    token: try StoredForm.deviceToken(row.2),
                    attempt: Int(row.4),
                    lastReason: row.5,
                    leaseGeneration: row.6,
                    leaseExpiresAt: Millis.date(leaseUntil)
                )
            }
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
        return try await transaction { connection in
            // The requests first, in seq order, then their retry rows: the lock order of every ledger
            // transaction (`finishIfDone` below needs them exclusive anyway).
            var requests = [String: (seq: Int64, app: String)]()
            for (id, seq, app) in try await connection.all(
                """
                SELECT id, seq, app FROM request
                WHERE id = ANY(\(Array(Set(outcomes.map(\.claim.requestID.value))))::TEXT[])
                ORDER BY seq FOR UPDATE
                """,
                as: (String, Int64, String).self,
                logger: logger
            ) {
                requests[id] = (seq, app)
            }
            struct Key: Hashable {
                var seq: Int64
                var token: String
            }
            let keys = outcomes.compactMap { outcome in
                requests[outcome.claim.requestID.value].map { Key(seq: $0.seq, token: outcome.claim.token.storageKey) }
            }.sorted { ($0.seq, $0.token) < ($1.seq, $1.token) }
            var holders = [Key: (owner: String?, generation: Int64)]()
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
                holders[Key(seq: seq, token: token)] = (holder, generation)
            }

            var lost = [RetryClaim]()
            var removed = [Key]()
            var rescheduled = [(key: Key, attempt: Int64, next: Int64, reason: String)]()
            var accepted = [Int64: (count: Int64, apnsID: String?)]()
            var failures = [Int64: [FailureEntry]]()
            var invalidations = [(app: String, DeviceInvalidation)]()
            var handled = Set<Key>()
            for outcome in outcomes {
                let claim = outcome.claim
                guard let request = requests[claim.requestID.value] else {
                    lost.append(claim)
                    continue
                }
                let key = Key(seq: request.seq, token: claim.token.storageKey)
                guard let holder = holders[key], holder.owner == owner.value,
                    holder.generation == claim.leaseGeneration,
                    handled.insert(key).inserted
                else {
                    lost.append(claim)
                    continue
                }
                switch outcome.result {
                case .accepted(let apnsID):
                    removed.append(key)
                    var entry = accepted[request.seq] ?? (0, nil)
                    entry.count += 1
                    if let apnsID { entry.apnsID = apnsID }
                    accepted[request.seq] = entry
                case .failed(let reason, let status):
                    removed.append(key)
                    failures[request.seq, default: []].append(
                        FailureEntry(token: claim.token, reason: reason, status: status, at: now)
                    )
                case .retry(let nextAttemptAt, let reason):
                    rescheduled.append((key, Int64(claim.attempt + 1), Millis.from(nextAttemptAt), reason))
                }
                if let invalidation = outcome.invalidation { invalidations.append((request.app, invalidation)) }
            }

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
                                \(rescheduled.map(\.attempt))::BIGINT[], \(rescheduled.map(\.next))::BIGINT[],
                                \(rescheduled.map(\.reason))::TEXT[]) AS k(seq, token, attempt, next, reason)
                    WHERE t.request_seq = k.seq AND t.token = k.token
                    """,
                    logger: logger
                )
                try await notifyWork(on: connection)
            }
            for (seq, entry) in accepted.sorted(by: { $0.key < $1.key }) {
                try await connection.run(
                    """
                    UPDATE request SET accepted = accepted + \(entry.count),
                        last_apns_id = COALESCE(\(entry.apnsID), last_apns_id),
                        last_apns_at = CASE WHEN \(entry.apnsID)::TEXT IS NULL THEN last_apns_at ELSE \(nowMs) END
                    WHERE seq = \(seq)
                    """,
                    logger: logger
                )
            }
            for (seq, entries) in failures.sorted(by: { $0.key < $1.key }) {
                try await Self.recordFailures(entries, requestSeq: seq, on: connection, logger: logger)
            }
            for (app, invalidation) in invalidations {
                _ = try await Self.invalidate(app: app, invalidation, at: now, on: connection, logger: logger)
            }
            for seq in Set(handled.map(\.seq)).sorted() {
                try await Self.finishIfDone(requestSeq: seq, nowMs: nowMs, on: connection, logger: logger)
            }
            return RetryRecordResult(applied: handled.count, leaseLost: lost)
        }
    }

    // MARK: - Inside transactions

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
