import GRDB

/// The SQLite schema, applied by GRDB's `DatabaseMigrator` (each migration once, in order, in its own
/// transaction; the applied list lives in `grdb_migrations`). Never edit a released migration: add one.
///
/// Times are whole milliseconds since 1970. Enumerations are small integers (documented per column).
///
/// ```
/// device          id (rowid; fan-out order), app, token, state 0 valid / 1 invalid, registered_at,
///                 last_registered_at, invalidated_at, invalid_reason        UNIQUE (app, token)
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
/// ```
///
/// Every token column (`device`, `request_token`, `retry`, `failure`) holds a `DeviceToken.storageKey`:
/// the lower-case hex of an APNs token, `fcm:` and the registration token of an FCM one (`:` is never
/// hex). Files older than v5 hold only hex, so their devices read back as APNs devices with no data
/// migration, and keys, indexes and orderings stay as they were. An app's FCM devices are the key range
/// `['fcm:', 'fcm;')` of `UNIQUE (app, token)`.
enum SQLiteSchema {
    static let unknownGroupTable = """
        CREATE TABLE request_unknown_group (
            request_seq INTEGER NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            name TEXT NOT NULL,
            PRIMARY KEY (request_seq, position)
        ) WITHOUT ROWID
        """

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: registry and ledger") { db in
            try db.execute(
                sql: """
                    CREATE TABLE device (
                        id INTEGER PRIMARY KEY,
                        app TEXT NOT NULL,
                        token TEXT NOT NULL,
                        state INTEGER NOT NULL DEFAULT 0,
                        registered_at INTEGER NOT NULL,
                        last_registered_at INTEGER NOT NULL,
                        invalidated_at INTEGER,
                        invalid_reason TEXT,
                        UNIQUE (app, token)
                    );
                    CREATE TABLE device_group (
                        id INTEGER PRIMARY KEY,
                        app TEXT NOT NULL,
                        name TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        UNIQUE (app, name)
                    );
                    CREATE TABLE membership (
                        group_id INTEGER NOT NULL REFERENCES device_group(id) ON DELETE CASCADE,
                        device_id INTEGER NOT NULL REFERENCES device(id) ON DELETE CASCADE,
                        PRIMARY KEY (group_id, device_id)
                    ) WITHOUT ROWID;
                    CREATE INDEX membership_by_device ON membership(device_id, group_id);

                    CREATE TABLE request (
                        seq INTEGER PRIMARY KEY,
                        id TEXT NOT NULL UNIQUE,
                        app TEXT NOT NULL,
                        push_type TEXT NOT NULL,
                        priority INTEGER NOT NULL,
                        expiration INTEGER,
                        collapse_id TEXT,
                        payload BLOB NOT NULL,
                        created_at INTEGER NOT NULL,
                        state INTEGER NOT NULL DEFAULT 0,
                        finished_at INTEGER,
                        target_count INTEGER NOT NULL DEFAULT 0,
                        device_bound INTEGER NOT NULL,
                        group_cut INTEGER NOT NULL DEFAULT 0,
                        token_cut INTEGER NOT NULL DEFAULT 0,
                        token_count INTEGER NOT NULL DEFAULT 0,
                        cut_done INTEGER NOT NULL DEFAULT 0,
                        accepted INTEGER NOT NULL DEFAULT 0,
                        last_apns_id TEXT
                    );
                    CREATE INDEX request_unfinished ON request(seq) WHERE state < 2;
                    CREATE TABLE request_group (
                        request_seq INTEGER NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                        group_id INTEGER NOT NULL REFERENCES device_group(id),
                        PRIMARY KEY (request_seq, group_id)
                    ) WITHOUT ROWID;
                    CREATE TABLE request_token (
                        request_seq INTEGER NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                        position INTEGER NOT NULL,
                        token TEXT NOT NULL,
                        covered INTEGER NOT NULL,
                        PRIMARY KEY (request_seq, position)
                    ) WITHOUT ROWID;

                    CREATE TABLE chunk (
                        id INTEGER PRIMARY KEY,
                        request_seq INTEGER NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                        kind INTEGER NOT NULL,
                        range_after INTEGER NOT NULL,
                        range_through INTEGER NOT NULL,
                        progress INTEGER NOT NULL,
                        state INTEGER NOT NULL DEFAULT 0,
                        owner TEXT,
                        lease_expires_at INTEGER NOT NULL,
                        generation INTEGER NOT NULL
                    );
                    CREATE INDEX chunk_by_request ON chunk(request_seq, state);
                    CREATE INDEX chunk_open_by_lease ON chunk(lease_expires_at) WHERE state = 0;

                    CREATE TABLE retry (
                        request_seq INTEGER NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                        token TEXT NOT NULL,
                        attempt INTEGER NOT NULL,
                        next_attempt_at INTEGER NOT NULL,
                        last_reason TEXT NOT NULL,
                        owner TEXT,
                        lease_expires_at INTEGER NOT NULL DEFAULT 0,
                        generation INTEGER NOT NULL DEFAULT 0,
                        PRIMARY KEY (request_seq, token)
                    ) WITHOUT ROWID;
                    CREATE INDEX retry_due ON retry(next_attempt_at);
                    CREATE TABLE failure (
                        request_seq INTEGER NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                        token TEXT NOT NULL,
                        reason TEXT NOT NULL,
                        status INTEGER,
                        failed_at INTEGER NOT NULL,
                        PRIMARY KEY (request_seq, token)
                    ) WITHOUT ROWID;
                    CREATE TABLE failure_count (
                        request_seq INTEGER NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                        reason TEXT NOT NULL,
                        count INTEGER NOT NULL,
                        PRIMARY KEY (request_seq, reason)
                    ) WITHOUT ROWID;
                    """
            )
        }
        migrator.registerMigration("v2: unknown groups of a request") { db in
            try db.execute(sql: SQLiteSchema.unknownGroupTable)
        }
        migrator.registerMigration("v3: instance heartbeats") { db in
            try db.execute(
                sql: "CREATE TABLE instance (id TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at INTEGER NOT NULL)"
            )
        }
        migrator.registerMigration("v4: accepted counts on chunks, as in PostgreSQL") { db in
            try db.execute(sql: "ALTER TABLE chunk ADD COLUMN accepted INTEGER NOT NULL DEFAULT 0")
        }
        // Token columns need nothing: what older files hold is APNs hex, a valid storage key (see above).
        migrator.registerMigration("v5: FCM, the request's fcm override") { db in
            try db.execute(sql: "ALTER TABLE request ADD COLUMN fcm BLOB")
        }
        return migrator
    }
}
