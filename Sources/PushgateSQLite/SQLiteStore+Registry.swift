public import Foundation
import GRDB
public import PushgateCore

extension SQLiteStore {
    public func register(_ registration: Registration) async throws -> RegistrationResult {
        try Self.check(registration)
        return try await write { db in try Self.register(registration, in: db) }
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
    /// millions (``registryCachePages``) and checkpoints less often (``registryCheckpointPages``), so
    /// a page dirtied by several batches is written back once.
    public func register(batch: [Registration]) async throws -> [RegistrationResult] {
        for registration in batch { try Self.check(registration) }
        guard !batch.isEmpty else { return [] }
        return try await writeUnsynced { db in
            try Self.tuneWriterForRegistrations(db)
            return try Self.register(batch: batch, in: db)
        }
    }

    /// The writer's `cache_size` in KiB (negative: SQLite's unit for KiB): 32 MiB. The token index of
    /// 5,000,000 devices has about 3,000 inner pages (12 MiB); SQLite's default, 2 MiB, re-reads them.
    /// Its leaves (about 500 MiB) are not meant to fit: each new token reads one leaf and dirties it,
    /// and a larger cache would mostly hold leaves no later registration comes back to (and count in
    /// the gateway's RSS).
    static let registryCachePages = -32_768
    /// `wal_autocheckpoint` of the writer, in pages: 262,144 (1 GiB of WAL between checkpoints; the
    /// default is 1,000, 4 MiB). A commit writes every page it dirtied to the WAL however often that
    /// page was written before; a checkpoint writes each page once however many commits dirtied it.
    /// Registrations dirty about one random token-index leaf each, so at 5,000,000 devices a batch of
    /// 50,000 writes about 40,000 frames, and a checkpoint every 64 MiB (as before) copied nearly every
    /// frame into the database again. Spaced by 1 GiB (about six such batches), the leaves those
    /// batches share are copied once: about half the checkpoint's writes and fsyncs at 5,000,000.
    ///
    /// The price: the WAL file grows to about 1 GiB and keeps that size on disk (SQLite reuses it from
    /// the start after a checkpoint); opening the file after a crash reads the whole WAL (up to 1 GiB)
    /// to rebuild its index; a page read that misses the cache looks it up in up to 64 WAL hash tables
    /// instead of 4; a checkpoint stalls the writer longer (0.86 s for a full 1 GiB, measured), and the
    /// first fsync'd commit after a storm of unsynced batches waits for their frames (0.3-0.4 s). The
    /// ledger's writes share this writer, so they checkpoint as rarely (their commits are fsync'd into
    /// the WAL, so this moves no durability of theirs). UDP registrations, committed without fsync, stay
    /// exposed to a power cut until the next fsync: see docs/benchmarks.md (issue #12 item 4).
    static let registryCheckpointPages = 262_144

    private static func tuneWriterForRegistrations(_ db: Database) throws {
        try db.execute(sql: "PRAGMA cache_size = \(registryCachePages)")
        try db.execute(sql: "PRAGMA wal_autocheckpoint = \(registryCheckpointPages)")
    }

    public func unassign(app: String, token: DeviceToken, group: String) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: """
                    DELETE FROM membership
                    WHERE group_id = (SELECT id FROM device_group WHERE app = ? AND name = ?)
                      AND device_id = (SELECT id FROM device WHERE app = ? AND token = ?)
                    """,
                arguments: [app, group, app, token.storageKey]
            )
            return db.changesCount > 0
        }
    }

    public func removeDevice(app: String, token: DeviceToken) async throws -> Bool {
        try await write { db in
            // Memberships go by ON DELETE CASCADE.
            try db.execute(sql: "DELETE FROM device WHERE app = ? AND token = ?", arguments: [app, token.storageKey])
            return db.changesCount > 0
        }
    }

    public func device(app: String, token: DeviceToken) async throws -> DeviceRecord? {
        try await read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT id, state, registered_at, last_registered_at, invalidated_at, invalid_reason
                        FROM device WHERE app = ? AND token = ?
                        """,
                    arguments: [app, token.storageKey]
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
            return DeviceRecord(
                app: app,
                token: token,
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
    /// SQL (tokens generated by SQLite, inserted in token order, one transaction, no fsync), then
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
                    try db.execute(
                        sql: """
                            INSERT OR IGNORE INTO device (app, token, state, registered_at, last_registered_at)
                            SELECT ?, token, 0, ?, ? FROM (
                                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
                                SELECT lower(hex(randomblob(32))) AS token FROM n
                            ) ORDER BY token
                            """,
                        arguments: [app, millis, millis, count]
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
                    sql: "SELECT id, state, last_registered_at FROM device WHERE app = ? AND token = ?"
                ),
                arguments: [app, invalidation.token.storageKey]
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

    private static func register(_ registration: Registration, in db: Database) throws -> RegistrationResult {
        var writer = try RegistrationWriter(db)
        return try writer.register(registration, key: registration.token.storageKey)
    }

    /// Applied in storage-key order (stable: a token repeated in the batch keeps its order), so that
    /// neighbouring tokens share the index pages just read; the results are in the batch's order.
    private static func register(batch: [Registration], in db: Database) throws -> [RegistrationResult] {
        var writer = try RegistrationWriter(db)
        let keys = batch.map(\.token.storageKey)  // once per registration, not per comparison
        let order = batch.indices.sorted { left, right in
            let (a, b) = (keys[left], keys[right])
            return a != b ? a.utf8.lexicographicallyPrecedes(b.utf8) : left < right  // SQLite's BINARY order
        }
        var results = [RegistrationResult](repeating: .created, count: batch.count)
        for index in order { results[index] = try writer.register(batch[index], key: keys[index]) }
        return results
    }
}

/// Applies registrations inside one transaction with statements prepared once, and group ids looked up
/// once per batch.
///
/// A new device costs two statements (insert device, insert membership); a known one three or four
/// (the insert that does nothing, a select, maybe an update, the membership).
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
    private let revalidateDevice: Statement
    private let touchDevice: Statement
    private let insertMembership: Statement

    init(_ db: Database) throws {
        self.db = db
        selectGroup = try db.cachedStatement(sql: "SELECT id FROM device_group WHERE app = ? AND name = ?")
        insertGroup = try db.cachedStatement(sql: "INSERT INTO device_group (app, name, created_at) VALUES (?, ?, ?)")
        insertDevice = try db.cachedStatement(
            sql: """
                INSERT INTO device (app, token, state, registered_at, last_registered_at) VALUES (?, ?, 0, ?, ?)
                ON CONFLICT (app, token) DO NOTHING
                """
        )
        selectDevice = try db.cachedStatement(
            sql: "SELECT id, state, last_registered_at FROM device WHERE app = ? AND token = ?"
        )
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

    /// `key` is `registration.token.storageKey`, made once by the caller.
    mutating func register(_ registration: Registration, key token: String) throws -> RegistrationResult {
        let at = Millis.from(registration.at)
        let groupID = try groupID(app: registration.app, name: registration.group, at: at)

        let deviceID: Int64
        var result: RegistrationResult
        try insertDevice.execute(arguments: [registration.app, token, at, at])
        if db.changesCount > 0 {
            deviceID = db.lastInsertedRowID
            result = .created
        } else {
            guard let row = try Row.fetchOne(selectDevice, arguments: [registration.app, token]) else {
                throw StoreError.backend("device vanished during its registration")
            }
            deviceID = row[0]
            let lastRegistered: Int64 = row[2]
            if StoredForm.deviceState(row[1]) == .invalid {
                try revalidateDevice.execute(arguments: [at, at, deviceID])
                result = .revalidated
            } else {
                if at > lastRegistered { try touchDevice.execute(arguments: [at, deviceID]) }
                result = .alreadyMember  // or joinedGroup, below
            }
        }
        try insertMembership.execute(arguments: [groupID, deviceID])
        if result == .alreadyMember, db.changesCount > 0 { result = .joinedGroup }
        return result
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
