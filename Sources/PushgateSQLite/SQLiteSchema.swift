import GRDB
import PushgateCore

/// The SQLite schema: the tables both stores share (`LedgerSchema`, rendered in SQLite's dialect) and
/// SQLite's own later migrations, applied by GRDB's `DatabaseMigrator` (each migration once, in order, in
/// its own transaction; the applied list lives in `grdb_migrations`). Never edit a released migration:
/// add one.
///
/// Times are whole milliseconds since 1970. Enumerations are small integers (documented per column).
///
/// ```
/// device          id (rowid; fan-out order), app, token, token_key (v7), state 0 valid / 1 invalid,
///                 registered_at, last_registered_at, invalidated_at, invalid_reason
///                 index device_by_token_key (token_key); (app, token) unique, kept so by the writer (v7;
///                 `UNIQUE (app, token)` before)
/// device_group    id, app, name, created_at                                  UNIQUE (app, name)
/// membership      (group_id, device_id) WITHOUT ROWID: fan-out range-scans it per group in device order;
///                 index (device_id, group_id) for lookups, removal and "is this token a member"
/// request         seq (rowid; FIFO order), id UNIQUE, app, push_type, priority, expiration (NULL storage
///                 policy, 0 immediately, else UNIX s), collapse_id, payload, created_at,
///                 state 0 queued / 1 sending / 2 done / 3 expired, finished_at, target_count,
///                 device_bound (highest device id at enqueue), group_cut (device id cut cursor),
///                 token_cut / token_count (direct token cut cursor), cut_done, accepted, last_apns_id
/// request_group   (request_seq, group_id)
/// request_token   (request_seq, position 1...n, token, covered = 1 when a target group's fan-out covers it)
/// chunk           id, request_seq, kind 0 device range / 1 direct tokens, (range_after, range_through], progress,
///                 state 0 open / 1 done, owner, lease_expires_at, generation
/// retry           (request_seq, token), attempt, next_attempt_at, last_reason, owner, lease_expires_at,
///                 generation                       -- only devices waiting for another attempt
/// failure         (request_seq, token), reason, status, failed_at   -- only devices that failed for good
/// failure_count   (request_seq, reason), count      -- includes targets expired without a row
/// request_unknown_group (request_seq, position, name) -- groups named that the app did not have (v2)
/// instance        id, holder, expires_at           -- one live process per instance id (v3)
/// chunk.accepted  what fan-out of the chunk accepted (v4); request.accepted counts retries (and, in files
///                 older than v4, fan-out too): the report sums both, as the PostgreSQL store does
/// request.fcm     the request's `fcm` override, its JSON bytes; NULL without one (v5)
/// chunk.skipped   targets the chunk's pages left out because they were invalidated or removed after the
///                 request was stored (v6); the report sums them, recorded with the progress that covers them
/// request_removed (request_seq, device_id): targets of an unfinished request whose membership was deleted
///                 after it was stored (unassigned, or the device removed), written by triggers (v6), so that
///                 a page can count what it no longer sees; deleted when the request finishes
/// request.idempotency_key, request.idempotency_fingerprint  the client's key and the SHA-256 of what it
///                 sent (v8); NULL without one. Index request_by_idempotency_key (app, idempotency_key) UNIQUE
///                 WHERE idempotency_key IS NOT NULL
/// request.webpush the request's `webpush` override, its JSON bytes; NULL without one (v9)
/// split by service (v10): request.fcm_targets, request.webpush_targets (the FCM and Web Push devices of
///                 target_count; NULL in requests stored before v10: their report has no split),
///                 request.fcm_accepted, request.webpush_accepted (retries'), chunk.fcm_accepted,
///                 chunk.webpush_accepted, chunk.fcm_skipped, chunk.webpush_skipped (fan-out's, with each
///                 progress record); the APNs part of each is the total less these. request_removed.platform
///                 ('apns', 'fcm', 'webpush'; NULL in rows recorded before v10), written by the triggers
/// ```
///
/// Every token column (`device`, `request_token`, `retry`, `failure`) holds a `DeviceToken.storageKey`:
/// the lower-case hex of an APNs token, `fcm:` and the registration token of an FCM one (`:` is never
/// hex). Files older than v5 hold only hex, so their devices read back as APNs devices with no data
/// migration, and keys, indexes and orderings stay as they were. Before v7 an app's FCM devices were the
/// key range `['fcm:', 'fcm;')` of `UNIQUE (app, token)`; from v7 they are the range `token_key < 0` of
/// `device_by_token_key` (see `TokenKey`). A Web Push subscription is `webpush:ENDPOINT P256DH AUTH`; its
/// `token_key` is its endpoint's (`DeviceToken.registryIdentity`), so that one endpoint is one device and
/// a new subscription of the same browser replaces its keys (v9 needs no data migration: no file before it
/// holds one).
enum SQLiteSchema {
    /// Version 6's table and triggers (see ``SQLiteStore/removedTargets(requestSeq:after:through:in:)``).
    /// A membership deleted while the device row exists, or a device deleted (its memberships go by
    /// cascade, possibly after the row), records the device for every unfinished request of that group
    /// that counted it: within the request's bound, and valid, or invalidated since the request was stored
    /// (what a page would have sent or skipped). No foreign key to `request`, as in PostgreSQL.
    static let removedTargets = [
        """
        CREATE TABLE request_removed (
            request_seq INTEGER NOT NULL,
            device_id INTEGER NOT NULL,
            PRIMARY KEY (request_seq, device_id)
        ) WITHOUT ROWID
        """,
        """
        CREATE TRIGGER membership_removed_from_requests AFTER DELETE ON membership BEGIN
            INSERT OR IGNORE INTO request_removed (request_seq, device_id)
            SELECT r.seq, OLD.device_id
            FROM request r CROSS JOIN request_group rg CROSS JOIN device d
            WHERE r.state < 2 AND rg.request_seq = r.seq AND rg.group_id = OLD.group_id
              AND d.id = OLD.device_id AND r.device_bound >= OLD.device_id
              AND (d.state = 0 OR d.invalidated_at >= r.created_at);
        END
        """,
        """
        CREATE TRIGGER device_removed_from_requests BEFORE DELETE ON device BEGIN
            INSERT OR IGNORE INTO request_removed (request_seq, device_id)
            SELECT r.seq, OLD.id
            FROM request r CROSS JOIN request_group rg CROSS JOIN membership m
            WHERE r.state < 2 AND rg.request_seq = r.seq AND m.group_id = rg.group_id AND m.device_id = OLD.id
              AND r.device_bound >= OLD.id AND (OLD.state = 0 OR OLD.invalidated_at >= r.created_at);
        END
        """,
    ]

    /// Version 10: the counts by service beside the totals (see above), and v6's triggers again, recording
    /// each removed target's service.
    static let splitByService =
        [
            "ALTER TABLE request ADD COLUMN fcm_targets INTEGER",
            "ALTER TABLE request ADD COLUMN webpush_targets INTEGER",
            "ALTER TABLE request ADD COLUMN fcm_accepted INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE request ADD COLUMN webpush_accepted INTEGER NOT NULL DEFAULT 0",
        ]
        + ["fcm_accepted", "webpush_accepted", "fcm_skipped", "webpush_skipped"].map {
            "ALTER TABLE chunk ADD COLUMN \($0) INTEGER NOT NULL DEFAULT 0"
        }
        + [
            "ALTER TABLE request_removed ADD COLUMN platform TEXT",
            "DROP TRIGGER membership_removed_from_requests",
            "DROP TRIGGER device_removed_from_requests",
            """
            CREATE TRIGGER membership_removed_from_requests AFTER DELETE ON membership BEGIN
                INSERT OR IGNORE INTO request_removed (request_seq, device_id, platform)
                SELECT r.seq, OLD.device_id, \(PushPlatform.sqlName(ofStorageKey: "d.token"))
                FROM request r CROSS JOIN request_group rg CROSS JOIN device d
                WHERE r.state < 2 AND rg.request_seq = r.seq AND rg.group_id = OLD.group_id
                  AND d.id = OLD.device_id AND r.device_bound >= OLD.device_id
                  AND (d.state = 0 OR d.invalidated_at >= r.created_at);
            END
            """,
            """
            CREATE TRIGGER device_removed_from_requests BEFORE DELETE ON device BEGIN
                INSERT OR IGNORE INTO request_removed (request_seq, device_id, platform)
                SELECT r.seq, OLD.id, \(PushPlatform.sqlName(ofStorageKey: "OLD.token"))
                FROM request r CROSS JOIN request_group rg CROSS JOIN membership m
                WHERE r.state < 2 AND rg.request_seq = r.seq AND m.group_id = rg.group_id AND m.device_id = OLD.id
                  AND r.device_bound >= OLD.id AND (OLD.state = 0 OR OLD.invalidated_at >= r.created_at);
            END
            """,
        ]

    /// `tokenKey` is the key function v7 fills `device.token_key` with: ``TokenKey/standard`` except in
    /// tests that force collisions.
    static func migrator(tokenKey: TokenKey = .standard) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: registry and ledger") { db in
            for statement in LedgerSchema.registryAndLedger(.sqlite) { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v2: unknown groups of a request") { db in
            try db.execute(sql: LedgerSchema.unknownGroups(.sqlite))
        }
        migrator.registerMigration("v3: instance heartbeats") { db in
            try db.execute(sql: LedgerSchema.instances(.sqlite))
        }
        migrator.registerMigration("v4: accepted counts on chunks, as in PostgreSQL") { db in
            try db.execute(sql: "ALTER TABLE chunk ADD COLUMN accepted INTEGER NOT NULL DEFAULT 0")
        }
        // Token columns need nothing: what older files hold is APNs hex, a valid storage key (see above).
        migrator.registerMigration("v5: FCM, the request's fcm override") { db in
            try db.execute(sql: "ALTER TABLE request ADD COLUMN fcm BLOB")
        }
        migrator.registerMigration("v6: skipped targets, invalidated or removed after the request was stored") { db in
            try db.execute(sql: "ALTER TABLE chunk ADD COLUMN skipped INTEGER NOT NULL DEFAULT 0")
            for statement in removedTargets { try db.execute(sql: statement) }
        }
        // SQLite cannot drop the index of a UNIQUE constraint, so the table is rebuilt (SQLite's
        // "other kinds of table schema changes": GRDB runs the migration with foreign keys off and
        // checks them before the commit, so `membership`'s references to device ids survive the drop).
        // Ids are copied, so memberships, fan-out cursors and `request.device_bound` keep their meaning.
        // v6's triggers go and come back with it: the one on `device` goes with the table, and the one on
        // `membership` names `device`, which does not exist between the drop and the rename.
        migrator.registerMigration("v7: devices indexed by an integer key of the token") { db in
            db.add(function: tokenKey.sqlFunction)  // also when the migrator runs outside a store (tests)
            for statement in deviceByTokenKey { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v8: idempotency keys of requests") { db in
            for statement in LedgerSchema.idempotencyKeys(.sqlite) { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v9: Web Push, the request's webpush override") { db in
            try db.execute(sql: "ALTER TABLE request ADD COLUMN webpush BLOB")
        }
        migrator.registerMigration("v10: the report split by service") { db in
            for statement in splitByService { try db.execute(sql: statement) }
        }
        return migrator
    }

    /// Version 7: `device` rebuilt with `token_key` and its index instead of `UNIQUE (app, token)`; v6's
    /// triggers dropped before and created again after, unchanged.
    static let deviceByTokenKey =
        [
            "DROP TRIGGER membership_removed_from_requests",
            "DROP TRIGGER device_removed_from_requests",
            """
            CREATE TABLE device_v7 (
                id INTEGER PRIMARY KEY,
                app TEXT NOT NULL,
                token TEXT NOT NULL,
                token_key INTEGER NOT NULL,
                state INTEGER NOT NULL DEFAULT 0,
                registered_at INTEGER NOT NULL,
                last_registered_at INTEGER NOT NULL,
                invalidated_at INTEGER,
                invalid_reason TEXT
            )
            """,
            """
            INSERT INTO device_v7 (id, app, token, token_key, state, registered_at, last_registered_at,
                                   invalidated_at, invalid_reason)
            SELECT id, app, token, \(TokenKey.sqlName)(app, token), state, registered_at, last_registered_at,
                   invalidated_at, invalid_reason
            FROM device ORDER BY id
            """,
            "DROP TABLE device",
            "ALTER TABLE device_v7 RENAME TO device",
            // Built once, after the copy: SQLite sorts the keys and packs the leaves.
            "CREATE INDEX device_by_token_key ON device (token_key)",
        ] + removedTargets.dropFirst()  // v6's two triggers (not its table, which stays)
}
