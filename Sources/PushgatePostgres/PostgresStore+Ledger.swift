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

    /// One REPEATABLE READ transaction: the device bound, the target count and the direct tokens' coverage
    /// come from one snapshot, and the request is stored in the same transaction. Other instances are
    /// told by `NOTIFY` when it commits.
    ///
    /// A request with an idempotency key first looks the key up (``earlierRequest(answering:on:)``) in the
    /// same snapshot. Two instances storing one key at once both find nothing and both insert; the
    /// partial unique index makes the second insert wait for the first transaction, and once that one
    /// commits, `ON CONFLICT DO NOTHING` under REPEATABLE READ fails the second with a serialization
    /// failure (the row it conflicts with is not in its snapshot). ``transaction(isolation:_:)`` runs it
    /// again, and its new snapshot finds the first request: it answers that one and stores nothing.
    public func enqueue(_ request: NotificationRequest) async throws -> EnqueueResult {
        let (groups, tokens) = try Self.checkedTargets(request)
        return try await transaction(isolation: "REPEATABLE READ") { connection in
            try await store(request, groups: groups, tokens: tokens, on: connection)
        }
    }

    /// The request's distinct groups and tokens; throws if it has no app or no target at all.
    static func checkedTargets(_ request: NotificationRequest) throws(StoreError) -> ([String], [DeviceToken]) {
        guard !request.app.isEmpty else { throw StoreError.invalidArgument("app name must not be empty") }
        let groups = StoredForm.distinct(request.groups)
        let tokens = StoredForm.distinct(request.devices)
        guard !groups.isEmpty || !tokens.isEmpty else { throw StoreError.noTargets() }
        return (groups, tokens)
    }

    /// ``enqueue(_:)`` in a REPEATABLE READ transaction of the caller's.
    func store(
        _ request: NotificationRequest,
        groups: [String],
        tokens: [DeviceToken],
        on connection: PostgresConnection
    ) async throws -> EnqueueResult {
        if let earlier = try await earlierRequest(answering: request, on: connection) { return earlier }
        if try await connection.first(
            "SELECT seq FROM request WHERE id = \(request.id.value)",
            as: Int64.self,
            logger: logger
        ) != nil {
            throw StoreError.duplicateRequestID(request.id)
        }
        var known = [String: Int64]()
        for (name, id) in try await connection.all(
            "SELECT name, id FROM device_group WHERE app = \(request.app) AND name = ANY(\(groups)::TEXT[])",
            as: (String, Int64).self,
            logger: logger
        ) {
            known[name] = id
        }
        let resolved = try TargetGroups.resolve(
            app: request.app,
            groups: groups,
            known: known,
            hasDevices: !tokens.isEmpty
        )
        let groupIDs = resolved.ids
        let bound =
            try await connection.first(
                "SELECT COALESCE(MAX(id), 0)::BIGINT FROM device",
                as: Int64.self,
                logger: logger
            ) ?? Int64(0)
        var targets = try await Self.countDeviceTargets(
            groupIDs: groupIDs,
            after: 0,
            through: bound,
            on: connection,
            logger: logger
        )
        var covered = [Bool]()
        covered.reserveCapacity(tokens.count)
        if !tokens.isEmpty {
            for (position, deviceState, isCovered) in try await connection.all(
                """
                SELECT t.position, d.state::BIGINT,
                    COALESCE(d.id <= \(bound) AND EXISTS (
                        SELECT 1 FROM membership m WHERE m.device_id = d.id AND m.group_id = ANY(\(groupIDs)::BIGINT[])), FALSE)
                FROM unnest(\(tokens.map(\.storageKey))::TEXT[]) WITH ORDINALITY AS t(token, position)
                LEFT JOIN device d ON d.app = \(request.app) AND d.token = t.token
                ORDER BY t.position
                """,
                as: (Int64, Int64?, Bool).self,
                logger: logger
            ) {
                covered.append(isCovered)
                // A member of a target group is counted with its group; a known invalid device is skipped.
                if !isCovered && deviceState != 1 { targets[tokens[Int(position) - 1].platform] += 1 }
            }
        }
        let targetCount = targets.total
        let created = Millis.from(request.createdAt)
        let done = targetCount == 0
        let state = (done ? Code.done : Code.queued).rawValue
        let fcm = request.fcm.map { Data($0.bytes) }
        let webPush = request.webPush.map { Data($0.bytes) }
        guard
            let seq = try await connection.first(
                """
                INSERT INTO request (id, app, push_type, priority, expiration, collapse_id, payload, fcm, created_at,
                                     device_bound, token_count, target_count, state, finished_at, cut_done,
                                     idempotency_key, idempotency_fingerprint, webpush, fcm_targets, webpush_targets)
                VALUES (\(request.id.value), \(request.app), \(request.pushType.rawValue), \(Int64(request.priority.rawValue)),
                        \(StoredForm.expiration(request.expiration)), \(request.collapseID?.value), \(Data(request.payload.bytes)),
                        \(fcm), \(created), \(bound), \(Int64(tokens.count)), \(Int64(targetCount)),
                        \(Int16(state)), \(done ? created : nil), \(done),
                        \(request.idempotency?.key.value), \(request.idempotency.map { Data($0.fingerprint) }),
                        \(webPush), \(Int64(targets.fcm)), \(Int64(targets.webpush)))
                ON CONFLICT DO NOTHING
                RETURNING seq
                """,
                as: Int64.self,
                logger: logger
            )
        else { throw StoreError.duplicateRequestID(request.id) }
        if !groupIDs.isEmpty {
            try await connection.run(
                "INSERT INTO request_group (request_seq, group_id) SELECT \(seq), g FROM unnest(\(groupIDs)::BIGINT[]) AS g",
                logger: logger
            )
        }
        if !tokens.isEmpty {
            try await connection.run(
                """
                INSERT INTO request_token (request_seq, position, token, covered)
                SELECT \(seq), t.position, t.token, t.covered
                FROM unnest(\(tokens.map(\.storageKey))::TEXT[], \(covered)::BOOLEAN[])
                    WITH ORDINALITY AS t(token, covered, position)
                """,
                logger: logger
            )
        }
        if !resolved.unknown.isEmpty {
            try await connection.run(
                """
                INSERT INTO request_unknown_group (request_seq, position, name)
                SELECT \(seq), t.position, t.name
                FROM unnest(\(resolved.unknown)::TEXT[]) WITH ORDINALITY AS t(name, position)
                """,
                logger: logger
            )
        }
        if !done { try await notifyWork(on: connection) }
        return EnqueueResult(id: request.id, targetCount: targetCount, unknownGroups: resolved.unknown)
    }

    /// The answer to a request whose idempotency key names a request stored for the same app within
    /// ``IdempotencyKey/window`` of it: that request's enqueue result (``EnqueueResult/isReplay``) when the
    /// fingerprints match; ``StoreError/Code/idempotencyKeyReused`` when they differ. Nil when the request
    /// is to be stored: it has no key, or its key is free. A key whose window is over is cleared from the
    /// old row, so that the new request can take it (two instances doing that at once: the second one's
    /// update fails as a serialization failure and runs again, finding the first one's request).
    ///
    /// One lookup in the partial unique index `request_by_idempotency_key`; a request without a key
    /// costs nothing.
    private func earlierRequest(
        answering request: NotificationRequest,
        on connection: PostgresConnection
    ) async throws -> EnqueueResult? {
        guard let idempotency = request.idempotency else { return nil }
        guard
            let (seq, id, targetCount, fingerprint, createdAt) = try await connection.first(
                """
                SELECT seq, id, target_count, idempotency_fingerprint, created_at
                FROM request WHERE app = \(request.app) AND idempotency_key = \(idempotency.key.value)
                """,
                as: (Int64, String, Int64, Data?, Int64).self,
                logger: logger
            )
        else { return nil }
        guard IdempotencyKey.isWithinWindow(storedAt: Millis.date(createdAt), now: request.createdAt) else {
            try await connection.run(
                "UPDATE request SET idempotency_key = NULL, idempotency_fingerprint = NULL WHERE seq = \(seq)",
                logger: logger
            )
            return nil
        }
        guard fingerprint.map(Array.init) == idempotency.fingerprint else {
            throw StoreError.idempotencyKeyReused(app: request.app)
        }
        let unknownGroups = try await connection.all(
            "SELECT name FROM request_unknown_group WHERE request_seq = \(seq) ORDER BY position",
            as: String.self,
            logger: logger
        )
        return EnqueueResult(
            id: try StoredForm.requestID(id),
            targetCount: Int(targetCount),
            unknownGroups: unknownGroups,
            isReplay: true
        )
    }

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

    /// Accepted counts are the request's own (retries) plus its chunks' (fan-out), kept apart so that
    /// instances recording progress do not all update the request row.
    public func report(_ id: RequestID) async throws -> DeliveryReport? {
        try await transaction(isolation: "REPEATABLE READ") { connection in
            guard
                let row = try await connection.first(
                    """
                    SELECT r.seq, r.app, r.state::BIGINT, r.target_count, r.accepted, r.created_at, r.finished_at,
                        r.last_apns_id, r.last_apns_at,
                        (SELECT COALESCE(SUM(c.accepted), 0)::BIGINT FROM chunk c WHERE c.request_seq = r.seq),
                        (SELECT COUNT(*) FROM retry t WHERE t.request_seq = r.seq),
                        (SELECT COALESCE(SUM(c.skipped), 0)::BIGINT FROM chunk c WHERE c.request_seq = r.seq)
                    FROM request r WHERE r.id = \(id.value)
                    """,
                    as: (Int64, String, Int64, Int64, Int64, Int64, Int64?, String?, Int64?, Int64, Int64, Int64).self,
                    logger: logger
                )
            else { return nil }
            var failedByReason = [String: Int]()
            for (reason, count) in try await connection.all(
                "SELECT reason, count FROM failure_count WHERE request_seq = \(row.0)",
                as: (String, Int64).self,
                logger: logger
            ) {
                failedByReason[reason] = Int(count)
            }
            var lastAPNsID = row.7
            if let latest = try await connection.first(
                """
                SELECT last_apns_id, last_apns_at FROM chunk
                WHERE request_seq = \(row.0) AND last_apns_at IS NOT NULL
                ORDER BY last_apns_at DESC, id DESC LIMIT 1
                """,
                as: (String, Int64).self,
                logger: logger
            ), latest.1 > (row.8 ?? Int64.min) {
                lastAPNsID = latest.0
            }
            let unknownGroups = try await connection.all(
                "SELECT name FROM request_unknown_group WHERE request_seq = \(row.0) ORDER BY position",
                as: String.self,
                logger: logger
            )
            let state = StoredForm.requestState(row.2)
            let byService = try await Self.serviceSplit(
                requestSeq: row.0,
                finished: state.isFinished,
                totals: (Int(row.3), Int(row.4 + row.9), failedByReason.values.reduce(0, +), Int(row.11)),
                on: connection,
                logger: logger
            )
            return DeliveryReport(
                id: id,
                app: row.1,
                state: state,
                targets: Int(row.3),
                accepted: Int(row.4 + row.9),
                failedByReason: failedByReason,
                pendingRetries: Int(row.10),
                createdAt: Millis.date(row.5),
                finishedAt: row.6.map(Millis.date),
                lastAPNsID: lastAPNsID,
                unknownGroups: unknownGroups,
                skipped: Int(row.11),
                byService: byService
            )
        }
    }

    /// ``ServiceSplit/read(finished:totals:targets:accepted:skipped:failedRows:)`` from the request's and its
    /// chunks' counts by service; an unfinished request's failure rows are counted by service as ranges of
    /// the primary key (`failure.token` is in byte order, `COLLATE "C"`).
    static func serviceSplit(
        requestSeq seq: Int64,
        finished: Bool,
        totals: (targets: Int, accepted: Int, failed: Int, skipped: Int),
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> ServiceSplit? {
        let (fcm, webPush) = (DeviceToken.fcmStoragePrefix, DeviceToken.webPushStoragePrefix)
        let (fcmEnd, webPushEnd) = (DeviceToken.storagePrefixEnd(fcm), DeviceToken.storagePrefixEnd(webPush))
        guard
            let row = try await connection.first(
                """
                SELECT r.fcm_targets, r.webpush_targets,
                    r.fcm_accepted + c.fcm_accepted, r.webpush_accepted + c.webpush_accepted,
                    c.fcm_skipped, c.webpush_skipped,
                    CASE WHEN \(finished) THEN 0 ELSE (SELECT COUNT(*) FROM failure f
                        WHERE f.request_seq = r.seq AND f.token >= \(fcm) AND f.token < \(fcmEnd)) END,
                    CASE WHEN \(finished) THEN 0 ELSE (SELECT COUNT(*) FROM failure f
                        WHERE f.request_seq = r.seq AND f.token >= \(webPush) AND f.token < \(webPushEnd)) END
                FROM request r, (
                    SELECT COALESCE(SUM(fcm_accepted), 0)::BIGINT AS fcm_accepted,
                        COALESCE(SUM(webpush_accepted), 0)::BIGINT AS webpush_accepted,
                        COALESCE(SUM(fcm_skipped), 0)::BIGINT AS fcm_skipped,
                        COALESCE(SUM(webpush_skipped), 0)::BIGINT AS webpush_skipped
                    FROM chunk WHERE request_seq = \(seq)
                ) c
                WHERE r.seq = \(seq)
                """,
                as: (Int64?, Int64?, Int64, Int64, Int64, Int64, Int64, Int64).self,
                logger: logger
            )
        else { return nil }
        return ServiceSplit.read(
            finished: finished,
            totals: totals,
            targets: row.0.map { (Int($0), Int(row.1 ?? 0)) },
            accepted: (Int(row.2), Int(row.3)),
            skipped: (Int(row.4), Int(row.5)),
            failedRows: (Int(row.6), Int(row.7))
        )
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

    /// Locks a request row: `FOR UPDATE` when `exclusive`, else `FOR KEY SHARE`. False if it is gone.
    /// Every transaction that locks chunk or retry rows of a request locks the request first.
    static func lockRequest(
        _ seq: Int64,
        exclusive: Bool,
        on connection: PostgresConnection,
        logger: Logger
    )
        async throws -> Bool
    {
        let sql: PostgresQuery =
            exclusive
            ? "SELECT seq FROM request WHERE seq = \(seq) FOR UPDATE"
            : "SELECT seq FROM request WHERE seq = \(seq) FOR KEY SHARE"
        return try await connection.first(sql, as: Int64.self, logger: logger) != nil
    }

    /// Marks the request done if all its targets are cut, all its chunks done and no retry pending: the
    /// steps of ``RequestFinish``, each with its statements.
    ///
    /// The request row is locked `FOR UPDATE` before it is read (the caller took it before any chunk or
    /// retry row): two instances completing its last two chunks at once then take turns, and the second
    /// one's check (a new snapshot, READ COMMITTED) sees the first one's chunk done.
    static func finishIfDone(
        requestSeq: Int64,
        nowMs: Int64,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        var finish = RequestFinish(seq: requestSeq, nowMillis: nowMs)
        var action = finish.start()
        while true {
            switch action {
            case .readCompletion(let seq):
                _ = try await lockRequest(seq, exclusive: true, on: connection, logger: logger)
                let row = try await connection.first(
                    """
                    SELECT state::BIGINT, cut_done,
                        EXISTS (
                            SELECT 1 FROM chunk
                            WHERE request_seq = \(seq) AND state = \(unescaped: Self.sql(ChunkCode.open))),
                        EXISTS (SELECT 1 FROM retry WHERE request_seq = \(seq))
                    FROM request WHERE seq = \(seq)
                    """,
                    as: (Int64, Bool, Bool, Bool).self,
                    logger: logger
                )
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
                try await forgetRemovedTargets(requestSeq: seq, on: connection, logger: logger)
                action = finish.forgotten()
            case .finished:
                return
            }
        }
    }
}
