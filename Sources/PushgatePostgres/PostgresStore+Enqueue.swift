import Foundation
import Logging
import PostgresNIO
public import PushgateCore

/// Storing notification requests: one alone (``enqueue(_:)``) or a group commit's batch (``enqueue(batch:claiming:)``,
/// in PostgresStore+Batches.swift), each request with the statements of ``store(_:groups:tokens:lookups:on:)``.
extension PostgresStore {
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
            let lookups = try await targetLookups(for: [(request.app, groups)], on: connection)
            let stored = try await store(request, groups: groups, tokens: tokens, lookups: lookups, on: connection)
            if stored.pending { try await notifyWork(on: connection) }
            return stored.result
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

    /// What every request of a transaction reads alike, read once for all of them: the device bound (the
    /// newest device id, the same in the whole REPEATABLE READ snapshot: an enqueue writes no device) and
    /// the ids of the groups the requests name, by app and name.
    struct TargetLookups: Sendable {
        var bound: Int64
        var groups: [String: [String: Int64]]

        func known(app: String) -> [String: Int64] { groups[app] ?? [:] }
    }

    /// ``TargetLookups`` for requests of `apps` naming `groups`, in one statement.
    func targetLookups(
        for requests: [(app: String, groups: [String])],
        on connection: PostgresConnection
    ) async throws -> TargetLookups {
        let pairs = requests.flatMap { request in request.groups.map { (request.app, $0) } }
        var lookups = TargetLookups(bound: 0, groups: [:])
        for (bound, app, name, id) in try await connection.all(
            """
            SELECT b.bound, g.app, g.name, g.id
            FROM (SELECT COALESCE(MAX(id), 0)::BIGINT AS bound FROM device) AS b
            LEFT JOIN (
                device_group g JOIN unnest(\(pairs.map(\.0))::TEXT[], \(pairs.map(\.1))::TEXT[]) AS t(app, name)
                    ON g.app = t.app AND g.name = t.name
            ) ON TRUE
            """,
            as: (Int64, String?, String?, Int64?).self,
            logger: logger
        ) {
            lookups.bound = bound
            if let app, let name, let id { lookups.groups[app, default: [:]][name] = id }
        }
        return lookups
    }

    /// A request as ``store(_:groups:tokens:lookups:on:)`` left it: its answer, and whether it waits to be
    /// sent (stored now with targets; false for a replay or a request that targets nobody).
    struct StoredRequest: Sendable {
        var result: EnqueueResult
        var pending: Bool
    }

    /// ``enqueue(_:)`` in a REPEATABLE READ transaction of the caller's, without its `NOTIFY`.
    ///
    /// Every refusal of a request without an idempotency key comes before its first write: an unknown
    /// group is decided from `lookups`, and a duplicate id is refused by the `request.id` unique
    /// constraint (`ON CONFLICT DO NOTHING` inserts nothing and returns no row; the idempotency key, the
    /// only other unique index it could meet, was looked up in this snapshot first). So a batch needs no
    /// savepoint for such a request. The request row and its groups, tokens and unknown groups are
    /// written by one statement.
    func store(
        _ request: NotificationRequest,
        groups: [String],
        tokens: [DeviceToken],
        lookups: TargetLookups,
        on connection: PostgresConnection
    ) async throws -> StoredRequest {
        if let earlier = try await earlierRequest(answering: request, on: connection) {
            return StoredRequest(result: earlier, pending: false)
        }
        let resolved = try TargetGroups.resolve(
            app: request.app,
            groups: groups,
            known: lookups.known(app: request.app),
            hasDevices: !tokens.isEmpty
        )
        let groupIDs = resolved.ids
        let bound = lookups.bound
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
        // The rows of request_group, request_token and request_unknown_group in the same statement (each
        // INSERT of an empty list writes nothing); none of them when the request row is not written.
        guard
            try await connection.first(
                """
                WITH r AS (
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
                ), g AS (
                    INSERT INTO request_group (request_seq, group_id)
                    SELECT r.seq, x.id FROM r, unnest(\(groupIDs)::BIGINT[]) AS x(id)
                ), k AS (
                    INSERT INTO request_token (request_seq, position, token, covered)
                    SELECT r.seq, t.position, t.token, t.covered
                    FROM r, unnest(\(tokens.map(\.storageKey))::TEXT[], \(covered)::BOOLEAN[])
                        WITH ORDINALITY AS t(token, covered, position)
                ), u AS (
                    INSERT INTO request_unknown_group (request_seq, position, name)
                    SELECT r.seq, t.position, t.name
                    FROM r, unnest(\(resolved.unknown)::TEXT[]) WITH ORDINALITY AS t(name, position)
                )
                SELECT seq FROM r
                """,
                as: Int64.self,
                logger: logger
            ) != nil
        else { throw StoreError.duplicateRequestID(request.id) }
        return StoredRequest(
            result: EnqueueResult(id: request.id, targetCount: targetCount, unknownGroups: resolved.unknown),
            pending: !done
        )
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
}
