public import Foundation
import GRDB
public import PushgateCore

extension SQLiteStore {
    public func register(_ registration: Registration) async throws -> RegistrationResult {
        try Self.check(registration)
        let tokenKey = tokenKey
        return try await write { db in try Self.register(registration, keying: tokenKey, in: db) }
    }

    /// One transaction for the whole batch, with cached prepared statements and a per-batch cache of
    /// group ids: about four statement executions per registration.
    ///
    /// Batches are what the UDP ingress writes, and a UDP registration is acknowledged to no one, so a
    /// batch commits without its own `fsync` (``writeUnsynced(_:)``, as a chunk's claim does): a
    /// process crash loses nothing (the WAL frames are in the OS's cache), and the next durable commit
    /// or checkpoint carries them to disk; a power cut can lose the batches since then, which their
    /// senders re-register. ``register(_:)`` (the HTTP API's, acknowledged) still commits with `fsync`.
    /// The writer also gets a page cache that holds the token index's inner pages of a registry of
    /// millions (``registryCachePages``).
    public func register(batch: [Registration]) async throws -> [RegistrationResult] {
        for registration in batch { try Self.check(registration) }
        guard !batch.isEmpty else { return [] }
        let tokenKey = tokenKey
        return try await writeUnsynced { db in
            try Self.tuneWriterForRegistrations(db)
            return try Self.register(batch: batch, keying: tokenKey, in: db)
        }
    }

    /// The writer's `cache_size` in KiB (negative: SQLite's unit for KiB): 32 MiB. SQLite's default,
    /// 2 MiB, re-reads the inner pages of a registry of millions. The token key index of 5,000,000
    /// devices (schema v7) is 81 MiB when packed (more once random inserts have split its leaves), so a
    /// good part of its leaves stays cached beside the inner pages of the device table and memberships;
    /// a larger cache would count in the gateway's RSS.
    static let registryCachePages = -32_768
    // The writer's WAL is no longer left to grow to 1 GiB between checkpoints (issue #12 item 4): on a
    // small volume that filled the disk. ``WALBound`` keeps it to 64 MiB, or half of a larger
    // database (a registry of millions still copies the index pages several batches share once), and less
    // on a volume with little room.

    private static func tuneWriterForRegistrations(_ db: Database) throws {
        try db.execute(sql: "PRAGMA cache_size = \(registryCachePages)")
    }

    public func unassign(app: String, token: DeviceToken, group: String) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: """
                    DELETE FROM membership
                    WHERE group_id = (SELECT id FROM device_group WHERE app = ? AND name = ?)
                      AND device_id = (SELECT id FROM device WHERE \(Self.deviceMatch(token)))
                    """,
                arguments: [app, group] + Self.deviceMatchArguments(app: app, token: token)
            )
            return db.changesCount > 0
        }
    }

    public func removeDevice(app: String, token: DeviceToken) async throws -> Bool {
        try await write { db in
            // Memberships go by ON DELETE CASCADE.
            try db.execute(
                sql: "DELETE FROM device WHERE \(Self.deviceMatch(token))",
                arguments: Self.deviceMatchArguments(app: app, token: token)
            )
            return db.changesCount > 0
        }
    }

    public func device(app: String, token: DeviceToken) async throws -> DeviceRecord? {
        try await read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT id, state, registered_at, last_registered_at, invalidated_at, invalid_reason, token
                        FROM device WHERE \(Self.deviceMatch(token))
                        """,
                    arguments: Self.deviceMatchArguments(app: app, token: token)
                )
            else { return nil }
            let deviceID: Int64 = row[0]
            let groups = try String.fetchAll(
                db,
                sql: """
                    SELECT g.name FROM membership m JOIN device_group g ON g.id = m.group_id
                    WHERE m.device_id = ? ORDER BY g.name
                    """,
                arguments: [deviceID]
            )
            let reason: String? = row[5]
            let invalidatedAt: Int64? = row[4]
            // The registered token: a browser looked up by its endpoint alone has its keys here.
            let stored: String = row[6]
            return DeviceRecord(
                app: app,
                token: try DeviceToken(storageKey: stored),
                state: StoredForm.deviceState(row[1]),
                groups: groups,
                registeredAt: Millis.date(row[2]),
                lastRegisteredAt: Millis.date(row[3]),
                invalidatedAt: invalidatedAt.map(Millis.date),
                invalidReason: reason.map(APNsReason.init(rawValue:))
            )
        }
    }

    /// Pages in device-id order (the membership primary key), with the last device id as the cursor:
    /// stable whatever is registered meanwhile (new devices get higher ids).
    public func devices(app: String, group: String, after: GroupCursor?, limit: Int) async throws -> GroupPage {
        let afterID = try GroupListing.start(after: after, limit: limit)
        return try await read { db in
            guard let groupID = try Self.groupID(app: app, name: group, in: db) else {
                throw StoreError.unknownGroup(app: app, group: group)
            }
            let rows: [GroupListing.Row] = try Row.fetchAll(
                db,
                sql: """
                    SELECT d.id, d.token, d.state, d.registered_at
                    FROM membership m JOIN device d ON d.id = m.device_id
                    WHERE m.group_id = ? AND m.device_id > ?
                    ORDER BY m.device_id LIMIT ?
                    """,
                arguments: [groupID, afterID, limit + 1]
            ).map { ($0[0], $0[1], $0[2], $0[3]) }
            return try GroupListing.page(rows: rows, limit: limit)
        }
    }

    public func invalidate(app: String, _ dead: DeviceInvalidation, at: Date) async throws -> InvalidationResult {
        try await write { db in try Self.invalidate(app: app, dead, at: at, in: db) }
    }

    /// For benchmarks only: adds `count` valid devices with random 32-byte tokens to `group`, in plain
    /// SQL (tokens generated by SQLite, inserted in key order, one transaction, no fsync), then
    /// checkpoints the WAL away. Millions take seconds, where ``register(batch:)`` would take
    /// minutes. Returns the devices created.
    package func prefillForBenchmark(
        app: String = Registration.defaultApp,
        group: String,
        count: Int,
        at: Date
    )
        async throws -> Int
    {
        guard count > 0 else { return 0 }
        let restore = synchronous.rawValue
        let millis = Millis.from(at)
        do {
            return try await pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = OFF")
                defer { try? db.execute(sql: "PRAGMA synchronous = \(restore)") }
                var created = 0
                try db.inTransaction(.immediate) {
                    try db.execute(
                        sql: "INSERT OR IGNORE INTO device_group (app, name, created_at) VALUES (?, ?, ?)",
                        arguments: [app, group, millis]
                    )
                    let groupID = try Self.groupID(app: app, name: group, in: db) ?? 0
                    let before = try Int64.fetchOne(db, sql: "SELECT ifnull(max(id), 0) FROM device") ?? 0
                    // 256 random bits do not repeat: no lookup before each insert, unlike a registration.
                    try db.execute(
                        sql: """
                            INSERT INTO device (app, token, token_key, state, registered_at, last_registered_at)
                            SELECT ?, token, \(TokenKey.sqlName)(?, token) AS key, 0, ?, ? FROM (
                                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
                                SELECT lower(hex(randomblob(32))) AS token FROM n
                            ) ORDER BY key
                            """,
                        arguments: [app, app, millis, millis, count]
                    )
                    created = db.changesCount
                    try db.execute(
                        sql: "INSERT INTO membership (group_id, device_id) SELECT ?, id FROM device WHERE id > ?",
                        arguments: [groupID, before]
                    )
                    return .commit
                }
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                return created
            }
        } catch let error as DatabaseError {
            throw StoreError.backend("prefill: \(error.message ?? "\(error.resultCode)")")
        }
    }

    /// For benchmarks only: how many members `group` has with a device id above `afterDevice`, and the
    /// highest such id (a poller counts only what is new since its last call). Zero for an unknown group.
    package func countMembersForBenchmark(
        app: String = Registration.defaultApp,
        group: String,
        afterDevice: Int64
    )
        async throws -> (count: Int, lastDevice: Int64)
    {
        try await read { db in
            guard let groupID = try Self.groupID(app: app, name: group, in: db) else { return (0, afterDevice) }
            let row = try Row.fetchOne(
                db,
                sql: "SELECT count(*), ifnull(max(device_id), ?) FROM membership WHERE group_id = ? AND device_id > ?",
                arguments: [afterDevice, groupID, afterDevice]
            )
            return (row?[0] ?? 0, row?[1] ?? afterDevice)
        }
    }

    // MARK: - Shared by the registry and the ledger (inside a transaction)

    /// Finds the device of an app and token (``deviceByTokenArguments(app:token:)``): the key index finds
    /// the rows of the token's key, the row's app and token pick the one (see ``TokenKey``). The key is
    /// computed by the connection's `pushgate_token_key`, which is the store's ``TokenKey``.
    static let deviceByToken = "token_key = \(TokenKey.sqlName)(?, ?) AND app = ? AND token = ?"

    static func deviceByTokenArguments(app: String, token: DeviceToken) -> StatementArguments {
        let key = token.storageKey
        return [app, key, app, key]
    }

    /// The registry's device of `token` (``deviceMatchArguments(app:token:)``): ``deviceByToken``, except
    /// that a Web Push device is found by its endpoint (`DeviceToken.registryIdentity`), whatever its keys:
    /// its key is the endpoint's, and its tokens are a range of the token text.
    static func deviceMatch(_ token: DeviceToken) -> String {
        token.platform == .webpush
            ? "token_key = \(TokenKey.sqlName)(?, ?) AND app = ? AND token > ? AND token < ?" : deviceByToken
    }

    static func deviceMatchArguments(app: String, token: DeviceToken) -> StatementArguments {
        guard let range = token.webPushStorageKeyRange else { return deviceByTokenArguments(app: app, token: token) }
        return [app, token.storageKey, app, range.lower, range.upper]
    }

    static func invalidate(
        app: String,
        _ invalidation: DeviceInvalidation,
        at: Date,
        in db: Database
    ) throws
        -> InvalidationResult
    {
        guard
            let row = try Row.fetchOne(
                try db.cachedStatement(
                    sql: "SELECT id, state, last_registered_at FROM device WHERE \(deviceMatch(invalidation.token))"
                ),
                arguments: deviceMatchArguments(app: app, token: invalidation.token)
            )
        else { return .unknownDevice }
        if let refusal = invalidation.refusal(stateCode: row[1], lastRegisteredAt: row[2]) { return refusal }
        try db.cachedStatement(sql: "UPDATE device SET state = 1, invalidated_at = ?, invalid_reason = ? WHERE id = ?")
            .execute(arguments: [Millis.from(at), invalidation.reason.rawValue, row[0] as Int64])
        return .invalidated
    }

    static func groupID(app: String, name: String, in db: Database) throws -> Int64? {
        try Int64.fetchOne(
            try db.cachedStatement(sql: "SELECT id FROM device_group WHERE app = ? AND name = ?"),
            arguments: [app, name]
        )
    }

    // MARK: - Registration

    private static func check(_ registration: Registration) throws {
        guard !registration.app.isEmpty else { throw StoreError.invalidArgument("app name must not be empty") }
        guard !registration.group.isEmpty else { throw StoreError.invalidArgument("group name must not be empty") }
    }

    private static func register(
        _ registration: Registration,
        keying tokenKey: TokenKey,
        in db: Database
    ) throws
        -> RegistrationResult
    {
        var writer = try RegistrationWriter(db)
        let token = registration.token.storageKey
        let key = tokenKey(app: registration.app, storageKey: token)
        return try writer.register(registration, token: token, key: key, id: nil)
    }

    /// Applied in key order (stable: a token repeated in the batch keeps its order), so that neighbouring
    /// keys share the index pages just read; the results are in the batch's order.
    ///
    /// New devices still get ids in the batch's order (fan-out's order is arrival order, as for
    /// registrations one at a time): the device at position i gets the highest id before the batch plus
    /// i + 1. Positions that find a known device leave their id unused; ids are only an order.
    private static func register(
        batch: [Registration],
        keying tokenKey: TokenKey,
        in db: Database
    ) throws
        -> [RegistrationResult]
    {
        var writer = try RegistrationWriter(db)
        let tokens = batch.map(\.token.storageKey)  // once per registration, not per comparison
        let keys = batch.indices.map { tokenKey(app: batch[$0].app, storageKey: tokens[$0]) }
        let order = batch.indices.sorted { left, right in
            keys[left] != keys[right] ? keys[left] < keys[right] : left < right
        }
        let base = try Int64.fetchOne(db, sql: "SELECT ifnull(max(id), 0) FROM device") ?? 0
        var results = [RegistrationResult](repeating: .created, count: batch.count)
        for index in order {
            let id = base + Int64(index) + 1
            results[index] = try writer.register(batch[index], token: tokens[index], key: keys[index], id: id)
        }
        return results
    }
}

/// Applies registrations inside one transaction with statements prepared once, and group ids looked up
/// once per batch.
///
/// A new device costs three statements (select device, insert device, insert membership); a known one two
/// or three (the select, maybe an update, the membership). The select before the insert is what keeps
/// `(app, token)` unique (schema v7, ``TokenKey``): this writer is the only one, and its transaction is
/// IMMEDIATE.
private struct RegistrationWriter {
    private struct GroupKey: Hashable {
        var app: String
        var name: String
    }

    private let db: Database
    private var groupIDs: [GroupKey: Int64] = [:]
    private let selectGroup: Statement
    private let insertGroup: Statement
    private let insertDevice: Statement
    private let selectDevice: Statement
    private let selectSubscription: Statement
    private let replaceKeys: Statement
    private let revalidateDevice: Statement
    private let touchDevice: Statement
    private let insertMembership: Statement

    init(_ db: Database) throws {
        self.db = db
        selectGroup = try db.cachedStatement(sql: "SELECT id FROM device_group WHERE app = ? AND name = ?")
        insertGroup = try db.cachedStatement(sql: "INSERT INTO device_group (app, name, created_at) VALUES (?, ?, ?)")
        insertDevice = try db.cachedStatement(
            sql: """
                INSERT INTO device (id, app, token, token_key, state, registered_at, last_registered_at)
                VALUES (?, ?, ?, ?, 0, ?, ?)
                """
        )
        selectDevice = try db.cachedStatement(
            sql: "SELECT id, state, last_registered_at FROM device WHERE token_key = ? AND app = ? AND token = ?"
        )
        selectSubscription = try db.cachedStatement(
            sql:
                "SELECT id, state, last_registered_at FROM device WHERE token_key = ? AND app = ? AND token > ? AND token < ?"
        )
        replaceKeys = try db.cachedStatement(sql: "UPDATE device SET token = ? WHERE id = ? AND token <> ?")
        revalidateDevice = try db.cachedStatement(
            sql: """
                UPDATE device SET state = 0, registered_at = ?, last_registered_at = max(last_registered_at, ?),
                    invalidated_at = NULL, invalid_reason = NULL
                WHERE id = ?
                """
        )
        touchDevice = try db.cachedStatement(sql: "UPDATE device SET last_registered_at = ? WHERE id = ?")
        insertMembership = try db.cachedStatement(
            sql: "INSERT INTO membership (group_id, device_id) VALUES (?, ?) ON CONFLICT DO NOTHING"
        )
    }

    /// `token` is `registration.token.storageKey` and `key` its ``TokenKey``, made once by the caller; `id`
    /// the new device's id if it is new (nil: SQLite's next).
    mutating func register(
        _ registration: Registration,
        token: String,
        key: Int64,
        id: Int64?
    ) throws
        -> RegistrationResult
    {
        let at = Millis.from(registration.at)
        let groupID = try groupID(app: registration.app, name: registration.group, at: at)

        let deviceID: Int64
        var result: RegistrationResult
        if let row = try existingDevice(registration, token: token, key: key) {
            deviceID = row[0]
            let lastRegistered: Int64 = row[2]
            if StoredForm.deviceState(row[1]) == .invalid {
                try revalidateDevice.execute(arguments: [at, at, deviceID])
                result = .revalidated
            } else {
                if at > lastRegistered { try touchDevice.execute(arguments: [at, deviceID]) }
                result = .alreadyMember  // or joinedGroup, below
            }
        } else {
            try insertDevice.execute(arguments: [id, registration.app, token, key, at, at])
            deviceID = db.lastInsertedRowID
            result = .created
        }
        try insertMembership.execute(arguments: [groupID, deviceID])
        if result == .alreadyMember, db.changesCount > 0 { result = .joinedGroup }
        return result
    }

    /// The device the registration names: by its token, or for a browser by its endpoint, whose keys it
    /// then replaces (a browser that subscribed again: one device, the new keys).
    private func existingDevice(_ registration: Registration, token: String, key: Int64) throws -> Row? {
        guard let range = registration.token.webPushStorageKeyRange else {
            return try Row.fetchOne(selectDevice, arguments: [key, registration.app, token])
        }
        guard
            let row = try Row.fetchOne(
                selectSubscription,
                arguments: [key, registration.app, range.lower, range.upper]
            )
        else { return nil }
        try replaceKeys.execute(arguments: [token, row[0] as Int64, token])
        return row
    }

    private mutating func groupID(app: String, name: String, at: Int64) throws -> Int64 {
        let key = GroupKey(app: app, name: name)
        if let known = groupIDs[key] { return known }
        let id: Int64
        if let existing = try Int64.fetchOne(selectGroup, arguments: [app, name]) {
            id = existing
        } else {
            try insertGroup.execute(arguments: [app, name, at])
            id = db.lastInsertedRowID
        }
        groupIDs[key] = id
        return id
    }
}
