public import Foundation
import Logging
import PostgresNIO
public import PushgateCore

extension PostgresStore {
    public func register(_ registration: Registration) async throws -> RegistrationResult {
        try await register(batch: [registration])[0]
    }

    /// One transaction and a fixed number of statements whatever the batch size: groups, devices and
    /// memberships are each written with one `INSERT … SELECT FROM unnest(…)`, and what each registration
    /// changed is worked out in memory from what those inserts report, in batch order.
    public func register(batch: [Registration]) async throws -> [RegistrationResult] {
        for registration in batch {
            guard !registration.app.isEmpty else { throw StoreError.invalidArgument("app name must not be empty") }
            guard !registration.group.isEmpty else { throw StoreError.invalidArgument("group name must not be empty") }
        }
        guard !batch.isEmpty else { return [] }
        return try await transaction { connection in
            try await RegistrationBatch(batch).apply(on: connection, logger: logger)
        }
    }

    public func unassign(app: String, token: DeviceToken, group: String) async throws -> Bool {
        try await transaction { connection in
            let stored = try await Self.storedKey(app: app, token: token, on: connection, logger: logger)
            return try await connection.first(
                """
                DELETE FROM membership
                WHERE group_id = (SELECT id FROM device_group WHERE app = \(app) AND name = \(group))
                  AND device_id = (SELECT id FROM device WHERE app = \(app) AND token = \(stored))
                RETURNING device_id
                """,
                as: Int64.self,
                logger: logger
            ) != nil
        }
    }

    public func removeDevice(app: String, token: DeviceToken) async throws -> Bool {
        try await transaction { connection in
            // Memberships go by ON DELETE CASCADE.
            let stored = try await Self.storedKey(app: app, token: token, on: connection, logger: logger)
            return try await connection.first(
                "DELETE FROM device WHERE app = \(app) AND token = \(stored) RETURNING id",
                as: Int64.self,
                logger: logger
            ) != nil
        }
    }

    public func device(app: String, token: DeviceToken) async throws -> DeviceRecord? {
        try await transaction(isolation: "REPEATABLE READ") { connection in
            // The registered token: a browser looked up by its endpoint alone has its keys here.
            let stored = try await Self.storedKey(app: app, token: token, on: connection, logger: logger)
            guard
                let row = try await connection.first(
                    """
                    SELECT id, state::BIGINT, registered_at, last_registered_at, invalidated_at, invalid_reason
                    FROM device WHERE app = \(app) AND token = \(stored)
                    """,
                    as: (Int64, Int64, Int64, Int64, Int64?, String?).self,
                    logger: logger
                )
            else { return nil }
            let groups = try await connection.all(
                """
                SELECT g.name FROM membership m JOIN device_group g ON g.id = m.group_id
                WHERE m.device_id = \(row.0) ORDER BY g.name COLLATE "C"
                """,
                as: String.self,
                logger: logger
            )
            return DeviceRecord(
                app: app,
                token: try DeviceToken(storageKey: stored),
                state: StoredForm.deviceState(row.1),
                groups: groups,
                registeredAt: Millis.date(row.2),
                lastRegisteredAt: Millis.date(row.3),
                invalidatedAt: row.4.map(Millis.date),
                invalidReason: row.5.map(APNsReason.init(rawValue:))
            )
        }
    }

    /// Pages in device-id order (the membership primary key), with the last device id as the cursor.
    public func devices(app: String, group: String, after: GroupCursor?, limit: Int) async throws -> GroupPage {
        let afterID = try GroupListing.start(after: after, limit: limit)
        return try await transaction(isolation: "REPEATABLE READ") { connection in
            guard
                let groupID = try await connection.first(
                    "SELECT id FROM device_group WHERE app = \(app) AND name = \(group)",
                    as: Int64.self,
                    logger: logger
                )
            else { throw StoreError.unknownGroup(app: app, group: group) }
            let rows = try await connection.all(
                """
                SELECT d.id, d.token, d.state::BIGINT, d.registered_at
                FROM membership m JOIN device d ON d.id = m.device_id
                WHERE m.group_id = \(groupID) AND m.device_id > \(afterID)
                ORDER BY m.device_id LIMIT \(limit + 1)
                """,
                as: (Int64, String, Int64, Int64).self,
                logger: logger
            )
            return try GroupListing.page(rows: rows.map { ($0.0, $0.1, $0.2, $0.3) }, limit: limit)
        }
    }

    public func invalidate(app: String, _ dead: DeviceInvalidation, at: Date) async throws -> InvalidationResult {
        try await transaction { connection in
            try await Self.invalidate(app: app, dead, at: at, on: connection, logger: logger)
        }
    }

    // MARK: - Shared (inside a transaction)

    /// The token column's text for `token`'s device: its ``DeviceToken/storageKey``, except that a Web Push
    /// device is found by its endpoint (``DeviceToken/registryIdentity``), whatever keys it holds: one
    /// look-up through the partial index `device_by_webpush_endpoint` (schema version 7). A browser that
    /// is not registered gets its own storage key, which matches nothing.
    static func storedKey(
        app: String,
        token: DeviceToken,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> String {
        guard token.platform == .webpush else { return token.storageKey }
        return try await connection.first(
            """
            SELECT token FROM device
            WHERE app = \(app) AND token LIKE 'webpush:%' AND split_part(token, ' ', 1) = \(token.registryIdentity)
            """,
            as: String.self,
            logger: logger
        ) ?? token.storageKey
    }

    static func invalidate(
        app: String,
        _ invalidation: DeviceInvalidation,
        at: Date,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> InvalidationResult {
        let stored = try await storedKey(app: app, token: invalidation.token, on: connection, logger: logger)
        guard
            let row = try await connection.first(
                """
                SELECT id, state::BIGINT, last_registered_at FROM device
                WHERE app = \(app) AND token = \(stored) FOR UPDATE
                """,
                as: (Int64, Int64, Int64).self,
                logger: logger
            )
        else { return .unknownDevice }
        if let refusal = invalidation.refusal(stateCode: row.1, lastRegisteredAt: row.2) { return refusal }
        try await connection.run(
            "UPDATE device SET state = 1, invalidated_at = \(Millis.from(at)), invalid_reason = \(invalidation.reason.rawValue) WHERE id = \(row.0)",
            logger: logger
        )
        return .invalidated
    }
}

/// A registration batch applied with a fixed number of statements.
///
/// The inserts decide, atomically against other instances, which devices and memberships are new
/// (`ON CONFLICT DO NOTHING RETURNING`); the devices' rows are then locked and read, the batch is replayed
/// in memory in order (so that a device repeated in the batch reports `created`, then `alreadyMember`), and
/// the devices' final registration times and states are written back with one `UPDATE … FROM unnest(…)`.
private struct RegistrationBatch {
    private struct DeviceKey: Hashable {
        var app: String
        var token: String
    }

    private struct GroupKey: Hashable {
        var app: String
        var name: String
    }

    private struct DeviceRow {
        var id: Int64
        var valid: Bool
        var registeredAt: Int64
        var lastRegisteredAt: Int64
        var changed = false
    }

    private let batch: [Registration]

    /// A browser registered twice in the batch with different keys takes the last ones throughout: one
    /// device per endpoint.
    init(_ batch: [Registration]) {
        var latest = [DeviceKey: DeviceToken]()
        for registration in batch where registration.token.platform == .webpush {
            latest[DeviceKey(app: registration.app, token: registration.token.registryIdentity)] = registration.token
        }
        self.batch =
            latest.isEmpty
            ? batch
            : batch.map { registration in
                var registration = registration
                if let token = latest[DeviceKey(app: registration.app, token: registration.token.registryIdentity)] {
                    registration.token = token
                }
                return registration
            }
    }

    /// A browser that subscribed again (same endpoint, new keys) keeps its device: its token takes the new
    /// keys before the insert, which then finds it.
    private func replaceWebPushKeys(on connection: PostgresConnection, logger: Logger) async throws {
        let renewed = batch.filter { $0.token.platform == .webpush }
        guard !renewed.isEmpty else { return }
        try await connection.run(
            """
            UPDATE device d SET token = k.token
            FROM unnest(\(renewed.map(\.app))::TEXT[], \(renewed.map(\.token.registryIdentity))::TEXT[], \(renewed.map(\.token.storageKey))::TEXT[])
                AS k(app, identity, token)
            WHERE d.token LIKE 'webpush:%' AND d.app = k.app AND split_part(d.token, ' ', 1) = k.identity
              AND d.token <> k.token
            """,
            logger: logger
        )
    }

    func apply(on connection: PostgresConnection, logger: Logger) async throws -> [RegistrationResult] {
        try await replaceWebPushKeys(on: connection, logger: logger)
        // Groups: first registration time of each new group.
        var groupFirstSeen = [GroupKey: Int64]()
        var deviceFirstSeen = [DeviceKey: Int64]()
        var groupOrder = [GroupKey]()
        var deviceOrder = [DeviceKey]()
        for registration in batch {
            let at = Millis.from(registration.at)
            let group = GroupKey(app: registration.app, name: registration.group)
            if groupFirstSeen[group] == nil {
                groupFirstSeen[group] = at
                groupOrder.append(group)
            }
            let device = DeviceKey(app: registration.app, token: registration.token.storageKey)
            if deviceFirstSeen[device] == nil {
                deviceFirstSeen[device] = at
                deviceOrder.append(device)
            }
        }
        // Sorted, so that concurrent batches lock rows in the same order.
        groupOrder.sort { ($0.app, $0.name) < ($1.app, $1.name) }
        deviceOrder.sort { ($0.app, $0.token) < ($1.app, $1.token) }

        try await connection.run(
            """
            INSERT INTO device_group (app, name, created_at)
            SELECT * FROM unnest(\(groupOrder.map(\.app))::TEXT[], \(groupOrder.map(\.name))::TEXT[], \(groupOrder.map { groupFirstSeen[$0]! })::BIGINT[])
            ON CONFLICT (app, name) DO NOTHING
            """,
            logger: logger
        )
        var groupIDs = [GroupKey: Int64]()
        for (app, name, id) in try await connection.all(
            """
            SELECT g.app, g.name, g.id FROM device_group g
            JOIN unnest(\(groupOrder.map(\.app))::TEXT[], \(groupOrder.map(\.name))::TEXT[]) AS k(app, name)
              ON g.app = k.app AND g.name = k.name
            """,
            as: (String, String, Int64).self,
            logger: logger
        ) {
            groupIDs[GroupKey(app: app, name: name)] = id
        }

        var created = Set<DeviceKey>()
        for (app, token) in try await connection.all(
            """
            INSERT INTO device (app, token, state, registered_at, last_registered_at)
            SELECT k.app, k.token, 0, k.at, k.at
            FROM unnest(\(deviceOrder.map(\.app))::TEXT[], \(deviceOrder.map(\.token))::TEXT[], \(deviceOrder.map { deviceFirstSeen[$0]! })::BIGINT[]) AS k(app, token, at)
            ON CONFLICT DO NOTHING
            RETURNING app, token
            """,
            as: (String, String).self,
            logger: logger
        ) {
            created.insert(DeviceKey(app: app, token: token))
        }
        var devices = [DeviceKey: DeviceRow]()
        for (app, token, id, state, registeredAt, lastRegisteredAt) in try await connection.all(
            """
            SELECT d.app, d.token, d.id, d.state::BIGINT, d.registered_at, d.last_registered_at FROM device d
            JOIN unnest(\(deviceOrder.map(\.app))::TEXT[], \(deviceOrder.map(\.token))::TEXT[]) AS k(app, token)
              ON d.app = k.app AND d.token = k.token
            ORDER BY d.id
            FOR UPDATE OF d
            """,
            as: (String, String, Int64, Int64, Int64, Int64).self,
            logger: logger
        ) {
            devices[DeviceKey(app: app, token: token)] = DeviceRow(
                id: id,
                valid: state == 0,
                registeredAt: registeredAt,
                lastRegisteredAt: lastRegisteredAt
            )
        }

        // Memberships: every distinct (group, device) pair of the batch; the insert says which are new.
        var pairs = [(group: Int64, device: Int64)]()
        var seenPairs = Set<[Int64]>()
        for registration in batch {
            guard let group = groupIDs[GroupKey(app: registration.app, name: registration.group)],
                let device = devices[DeviceKey(app: registration.app, token: registration.token.storageKey)]
            else { throw StoreError.backend("a device or group vanished during its registration") }
            if seenPairs.insert([group, device.id]).inserted { pairs.append((group, device.id)) }
        }
        pairs.sort { ($0.group, $0.device) < ($1.group, $1.device) }
        var newPairs = Set<[Int64]>()
        for (group, device) in try await connection.all(
            """
            INSERT INTO membership (group_id, device_id)
            SELECT * FROM unnest(\(pairs.map(\.group))::BIGINT[], \(pairs.map(\.device))::BIGINT[])
            ON CONFLICT DO NOTHING
            RETURNING group_id, device_id
            """,
            as: (Int64, Int64).self,
            logger: logger
        ) {
            newPairs.insert([group, device])
        }

        // Replay the batch in order.
        var results = [RegistrationResult]()
        results.reserveCapacity(batch.count)
        var firstSeenDevice = Set<DeviceKey>()
        var claimedPairs = Set<[Int64]>()
        for registration in batch {
            let at = Millis.from(registration.at)
            let key = DeviceKey(app: registration.app, token: registration.token.storageKey)
            var row = devices[key]!
            var result: RegistrationResult
            if created.contains(key), firstSeenDevice.insert(key).inserted {
                result = .created  // inserted with this registration's time
            } else if !row.valid {
                row.valid = true
                row.registeredAt = at
                row.lastRegisteredAt = max(row.lastRegisteredAt, at)
                row.changed = true
                result = .revalidated
            } else {
                if at > row.lastRegisteredAt {
                    row.lastRegisteredAt = at
                    row.changed = true
                }
                result = .alreadyMember
            }
            firstSeenDevice.insert(key)
            let pair = [groupIDs[GroupKey(app: registration.app, name: registration.group)]!, row.id]
            if newPairs.contains(pair), claimedPairs.insert(pair).inserted, result == .alreadyMember {
                result = .joinedGroup
            } else {
                claimedPairs.insert(pair)
            }
            devices[key] = row
            results.append(result)
        }

        let changed = devices.values.filter(\.changed).sorted { $0.id < $1.id }
        if !changed.isEmpty {
            try await connection.run(
                """
                UPDATE device d SET state = 0, registered_at = u.registered_at, last_registered_at = u.last_registered_at,
                    invalidated_at = NULL, invalid_reason = NULL
                FROM unnest(\(changed.map(\.id))::BIGINT[], \(changed.map(\.registeredAt))::BIGINT[], \(changed.map(\.lastRegisteredAt))::BIGINT[])
                    AS u(id, registered_at, last_registered_at)
                WHERE d.id = u.id
                """,
                logger: logger
            )
        }
        return results
    }
}
