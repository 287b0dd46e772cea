public import Foundation
import Logging
import PostgresNIO
public import PushgateCore

extension PostgresStore {
    typealias Code = StoredForm.RequestStateCode
    typealias ChunkCode = StoredForm.ChunkStateCode

    /// A stored code as SQL text, for `\(unescaped:)`: a literal, so that partial indexes (`WHERE state < 2`)
    /// match the query as they would a number written in it.
    static func sql(_ code: some RawRepresentable<Int64>) -> String { String(code.rawValue) }

    // MARK: - Requests

    public func request(_ id: RequestID) async throws -> NotificationRequest? {
        try await transaction(isolation: "REPEATABLE READ") { connection in
            guard
                let row = try await connection.first(
                    """
                    SELECT seq, app, push_type, priority::BIGINT, expiration, collapse_id, payload, created_at, fcm,
                           idempotency_key, idempotency_fingerprint, webpush
                    FROM request WHERE id = \(id.value)
                    """,
                    as: (Int64, String, String, Int64, Int64?, String?, Data, Int64, Data?, String?, Data?, Data?).self,
                    logger: logger
                )
            else { return nil }
            let groups = try await connection.all(
                """
                SELECT g.name FROM request_group rg JOIN device_group g ON g.id = rg.group_id
                WHERE rg.request_seq = \(row.0) ORDER BY g.name COLLATE "C"
                """,
                as: String.self,
                logger: logger
            )
            let tokens = try await connection.all(
                "SELECT token FROM request_token WHERE request_seq = \(row.0) ORDER BY position",
                as: String.self,
                logger: logger
            )
            do throws(ValidationError) {
                return NotificationRequest(
                    id: id,
                    app: row.1,
                    groups: groups,
                    devices: try tokens.map { key throws(ValidationError) in try DeviceToken(storageKey: key) },
                    pushType: try PushType(validating: row.2),
                    priority: try Priority(validating: Int(row.3)),
                    expiration: StoredForm.expiration(stored: row.4),
                    collapseID: try row.5.map { value throws(ValidationError) in try CollapseID(value) },
                    payload: try Payload(jsonBytes: Array(row.6)),
                    fcm: try row.8.map { bytes throws(ValidationError) in try FCMOverride(jsonBytes: Array(bytes)) },
                    webPush: try row.11.map { bytes throws(ValidationError) in
                        try WebPushOverride(jsonBytes: Array(bytes))
                    },
                    createdAt: Millis.date(row.7),
                    idempotency: try row.9.map { key throws(ValidationError) in
                        Idempotency(key: try IdempotencyKey(key), fingerprint: Array(row.10 ?? Data()))
                    }
                )
            } catch {
                throw StoreError.backend("stored request \(id) is malformed: \(error)")
            }
        }
    }

    public func failures(of id: RequestID, after: DeviceToken?, limit: Int) async throws -> [FailureEntry] {
        _ = try StoreError.positive(limit)
        return try await read { connection in
            try await connection.all(
                """
                SELECT f.token, f.reason, f.status::BIGINT, f.failed_at FROM failure f JOIN request r ON r.seq = f.request_seq
                WHERE r.id = \(id.value) AND f.token > \(after?.storageKey ?? "") ORDER BY f.token LIMIT \(limit)
                """,
                as: (String, String, Int64?, Int64).self,
                logger: logger
            ).map { row in
                FailureEntry(
                    token: try StoredForm.deviceToken(row.0),
                    reason: row.1,
                    status: row.2.map { Int($0) },
                    at: Millis.date(row.3)
                )
            }
        }
    }

    // MARK: - Leases, expiry, wake-ups

    public func releaseLeases(owner: InstanceID, now: Date) async throws -> Int {
        let nowMs = Millis.from(now)
        return try await transaction { connection in
            // A new generation, so that late progress from the released holder is refused.
            let chunks = try await connection.all(
                """
                UPDATE chunk SET lease_expires_at = LEAST(lease_expires_at, \(nowMs)), generation = generation + 1
                WHERE owner = \(owner.value) AND state = \(unescaped: Self.sql(ChunkCode.open)) RETURNING id
                """,
                as: Int64.self,
                logger: logger
            )
            let retries = try await connection.all(
                """
                UPDATE retry SET owner = NULL, lease_expires_at = LEAST(lease_expires_at, \(nowMs)), generation = generation + 1
                WHERE owner = \(owner.value) RETURNING attempt
                """,
                as: Int64.self,
                logger: logger
            )
            let released = chunks.count + retries.count
            if released > 0 { try await notifyWork(on: connection) }
            return released
        }
    }

    public func expireOverdue(now: Date) async throws -> [RequestID] {
        let nowMs = Millis.from(now)
        return try await transaction { connection in
            try await Self.expireOverdue(nowMs: nowMs, on: connection, logger: logger)
        }
    }

    public func nextWakeUp(after now: Date) async throws -> Date? {
        try await read { connection in
            guard
                let row = try await connection.first(
                    """
                    SELECT (SELECT MIN(GREATEST(next_attempt_at, lease_expires_at)) FROM retry),
                           (SELECT MIN(lease_expires_at) FROM chunk
                            WHERE state = \(unescaped: Self.sql(ChunkCode.open))),
                           (SELECT MIN(expiration) FROM request
                            WHERE state < \(unescaped: Self.sql(Code.done)) AND expiration > 0)
                    """,
                    as: (Int64?, Int64?, Int64?).self,
                    logger: logger
                )
            else { return nil }
            return LedgerArithmetic.nextWakeUp(retryDue: row.0, leaseEnd: row.1, expiration: row.2)
        }
    }

    // MARK: - Inside transactions

    /// A failure row per device (the first failure of a device in a request wins) and the counts by
    /// reason, in one statement.
    static func recordFailures(
        _ failures: [FailureEntry],
        requestSeq: Int64,
        on connection: PostgresConnection,
        logger: Logger
    )
        async throws
    {
        guard !failures.isEmpty else { return }
        try await connection.run(
            """
            WITH inserted AS (
                INSERT INTO failure (request_seq, token, reason, status, failed_at)
                SELECT \(requestSeq), f.token, f.reason, NULLIF(f.status, -1), f.failed_at
                FROM unnest(\(failures.map(\.token.storageKey))::TEXT[], \(failures.map(\.reason))::TEXT[],
                            \(failures.map { Int64($0.status ?? -1) })::BIGINT[], \(failures.map { Millis.from($0.at) })::BIGINT[])
                    AS f(token, reason, status, failed_at)
                ON CONFLICT (request_seq, token) DO NOTHING
                RETURNING reason
            )
            INSERT INTO failure_count (request_seq, reason, count)
            SELECT \(requestSeq), reason, COUNT(*) FROM inserted GROUP BY reason
            ON CONFLICT (request_seq, reason) DO UPDATE SET count = failure_count.count + excluded.count
            """,
            logger: logger
        )
    }

    static func addFailureCount(
        _ count: Int,
        reason: String,
        requestSeq: Int64,
        on connection: PostgresConnection,
        logger: Logger
    )
        async throws
    {
        guard count > 0 else { return }
        try await connection.run(
            """
            INSERT INTO failure_count (request_seq, reason, count) VALUES (\(requestSeq), \(reason), \(Int64(count)))
            ON CONFLICT (request_seq, reason) DO UPDATE SET count = failure_count.count + excluded.count
            """,
            logger: logger
        )
    }

    /// A request's completion as ``finishIfDone(requestSeq:nowMs:locked:completion:on:logger:)`` reads it:
    /// state, cut through, open chunks, pending retries, removed targets recorded.
    typealias CompletionRow = (Int64, Bool, Bool, Bool, Bool)

    /// The columns of a ``CompletionRow`` of request `r` (a statement adds `FROM request r WHERE …`),
    /// leaving chunk `excluded` out of the open ones: a statement that closes it in a CTE of its own does
    /// not see that write.
    static func completionColumns(excludingChunk excluded: Int64? = nil) -> String {
        """
        SELECT r.state::BIGINT, r.cut_done,
            EXISTS (
                SELECT 1 FROM chunk c
                WHERE c.request_seq = r.seq AND c.state = \(sql(ChunkCode.open))\(excluded.map { " AND c.id <> \($0)" } ?? "")),
            EXISTS (SELECT 1 FROM retry t WHERE t.request_seq = r.seq),
            EXISTS (SELECT 1 FROM request_removed t WHERE t.request_seq = r.seq)
        """
    }

    /// Marks the request done if all its targets are cut, all its chunks done and no retry pending: the
    /// steps of ``RequestFinish``, each with its statements.
    ///
    /// The request row is locked `FOR UPDATE` before it is read (here, or by the caller before any chunk
    /// or retry row: `locked`), in an earlier statement: two instances completing its last two chunks at
    /// once then take turns, and the second one's check (a new snapshot, READ COMMITTED) sees the first
    /// one's chunk done. `completion`, when given, is that check as a later statement of the caller's
    /// already read it. The
    /// removed targets are deleted only when the completion read saw one: a row that a membership's
    /// deletion commits after that read is left behind, as one committed after the `DELETE` always was
    /// (the triggers take no lock on the request); no read of a finished request looks at them.
    static func finishIfDone(
        requestSeq: Int64,
        nowMs: Int64,
        locked: Bool = false,
        completion known: CompletionRow?? = nil,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        var finish = RequestFinish(seq: requestSeq, nowMillis: nowMs)
        var action = finish.start()
        var hasRemovedTargets = true
        while true {
            switch action {
            case .readCompletion(let seq):
                let row: CompletionRow?
                if let known {
                    row = known
                } else {
                    // The lock in a statement of its own: the read after it takes a new snapshot, which sees
                    // what the transaction it waited for committed (a read in the locking statement would
                    // recheck only the request row, and see the other chunk still open).
                    if !locked {
                        try await connection.run(
                            "SELECT seq FROM request WHERE seq = \(seq) FOR UPDATE",
                            logger: logger
                        )
                    }
                    row = try await connection.first(
                        """
                        \(unescaped: completionColumns())
                        FROM request r WHERE r.seq = \(seq)
                        """,
                        as: CompletionRow.self,
                        logger: logger
                    )
                }
                hasRemovedTargets = row?.4 ?? true
                action = finish.completionRead(
                    row.map {
                        RequestCompletion(state: $0.0, cutDone: $0.1, hasOpenChunks: $0.2, hasPendingRetries: $0.3)
                    }
                )
            case .markFinished(let seq, let final, let nowMs):
                try await connection.run(
                    """
                    UPDATE request SET state = \(unescaped: Self.sql(final)), finished_at = \(nowMs) WHERE seq = \(seq)
                    """,
                    logger: logger
                )
                action = finish.marked()
            case .forgetRemovedTargets(let seq):
                if hasRemovedTargets { try await forgetRemovedTargets(requestSeq: seq, on: connection, logger: logger) }
                action = finish.forgotten()
            case .finished:
                return
            }
        }
    }
}
