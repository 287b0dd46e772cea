import PushgateCore

/// The PostgreSQL schema: the tables both stores share (`LedgerSchema`, rendered in PostgreSQL's dialect)
/// with what several instances need.
///
/// Migrations are numbered; each runs once, in order, in the transaction that records it in
/// `pushgate_migration`. The whole migration runs under a transaction-scoped advisory lock, so that
/// instances starting at the same time take turns: the first applies, the others find the work done.
/// Never edit a released migration: add one.
///
/// Differences from SQLite, all for several writers (version 1 adds them to the shared tables):
/// - `chunk.last_apns_id`, `chunk.last_apns_at`: like `chunk.accepted` (which both stores keep: fan-out
///   counts on the chunk row, which only its holder writes, retries' on the request row; the report sums
///   them), the latest apns-id of a chunk's progress lives on the chunk row instead of on the request row
///   that every instance's progress would otherwise update (a hot row).
/// - `chunk_open_by_owner` and `retry_by_owner`: indexes for releasing one instance's leases.
/// - Ids come from identity sequences. A sequence value may commit late, so the bound a request takes at
///   enqueue can leave out a device registered in the same instant (never include one registered later).
///
/// Token columns hold `DeviceToken.storageKey` (APNs hex, `fcm:` and an FCM registration token), as in
/// SQLite: schemas older than version 4 hold only hex, which reads back as APNs devices unchanged.
/// Version 4 adds `request.fcm`, the request's `fcm` override (JSON bytes, NULL without one).
/// Version 5 adds `chunk.skipped`: targets the chunk's pages left out because they were invalidated or
/// removed after the request was stored, recorded with the progress that covers them; the report sums them.
/// And `request_removed` with its triggers (``removedTargets``), as in SQLite.
/// Version 6 adds `request.idempotency_key` and `request.idempotency_fingerprint` with the partial unique
/// index `request_by_idempotency_key (app, idempotency_key)`, as SQLite's v8 (`LedgerSchema.idempotencyKeys`).
/// Version 7 adds `request.webpush`, the request's `webpush` override, and the partial unique index
/// `device_by_webpush_endpoint (app, split_part(token, ' ', 1)) WHERE token LIKE 'webpush:%'`: a Web Push
/// device is `webpush:ENDPOINT P256DH AUTH`, and one endpoint is one device (a browser that subscribes
/// again replaces its keys), also between instances registering at once (the loser's insert conflicts and
/// its batch fails, to be sent again).
/// Version 8 splits the report by service: `request.fcm_targets` and `request.webpush_targets` (NULL in
/// requests stored before: no split), `request.fcm_accepted`/`webpush_accepted` (retries'),
/// `chunk.fcm_accepted`/`webpush_accepted`/`fcm_skipped`/`webpush_skipped` (fan-out's), the APNs part being
/// the total less these, as in SQLite's v10; and `request_removed.platform`, which the triggers now record.
/// Version 9 adds the partial index `request_uncut (seq) WHERE state < 2 AND NOT cut_done`, which the claim's
/// candidate read scans (PostgreSQL only: SQLite's claim reads `request_unfinished` as before).
enum PostgresSchema {
    struct Migration: Sendable {
        var version: Int
        var name: String
        var statements: [String]
    }

    static let migrations: [Migration] = [
        Migration(
            version: 1,
            name: "registry and ledger",
            statements: LedgerSchema.registryAndLedger(.postgres) + [
                // What several writers need besides the tables both stores share (see above).
                "ALTER TABLE request ADD COLUMN last_apns_at BIGINT",
                """
                ALTER TABLE chunk ADD COLUMN accepted BIGINT NOT NULL DEFAULT 0, ADD COLUMN last_apns_id TEXT,
                    ADD COLUMN last_apns_at BIGINT
                """,
                "CREATE INDEX chunk_open_by_owner ON chunk (owner) WHERE state = 0",
                "CREATE INDEX retry_by_owner ON retry (owner) WHERE owner IS NOT NULL",
            ]
        ),
        Migration(version: 2, name: "unknown groups of a request", statements: [LedgerSchema.unknownGroups(.postgres)]),
        Migration(version: 3, name: "instance heartbeats", statements: [LedgerSchema.instances(.postgres)]),
        Migration(
            version: 4,
            name: "FCM, the request's fcm override, failures in storage-key (byte) order",
            statements: [
                "ALTER TABLE request ADD COLUMN fcm BYTEA",
                // FCM tokens mix cases: failures are paged in byte order (as in SQLite) whatever the
                // database's default collation, and the primary key serves that order.
                #"ALTER TABLE failure ALTER COLUMN token TYPE TEXT COLLATE "C""#,
            ]
        ),
        Migration(
            version: 5,
            name: "skipped targets, invalidated or removed after the request was stored",
            statements: ["ALTER TABLE chunk ADD COLUMN skipped BIGINT NOT NULL DEFAULT 0"] + removedTargets
        ),
        Migration(
            version: 6,
            name: "idempotency keys of requests",
            statements: LedgerSchema.idempotencyKeys(.postgres)
        ),
        Migration(
            version: 7,
            name: "Web Push, the request's webpush override and one device per endpoint",
            statements: [
                "ALTER TABLE request ADD COLUMN webpush BYTEA",
                """
                CREATE UNIQUE INDEX device_by_webpush_endpoint ON device (app, split_part(token, ' ', 1))
                WHERE token LIKE 'webpush:%'
                """,
            ]
        ),
        Migration(version: 8, name: "the report split by service", statements: splitByService),
        Migration(
            version: 9,
            name: "the claim's candidates: unfinished requests with uncut targets",
            statements: [
                // What the claim's candidate read scans: `request_unfinished` also holds every request whose
                // chunks are all cut but not yet sent, and, under a stream of one-device requests, the dead
                // entries of each one's updates (its state is in the predicate, so no update of it is HOT):
                // at 2,000 requests/s that read took 175 ms on average.
                "CREATE INDEX request_uncut ON request (seq) WHERE state < 2 AND NOT cut_done"
            ]
        ),
    ]

    /// Version 8's columns (see above) and v5's trigger functions again, recording each removed target's
    /// service (the triggers call the functions by name: they stay).
    static let splitByService = [
        """
        ALTER TABLE request ADD COLUMN fcm_targets BIGINT, ADD COLUMN webpush_targets BIGINT,
            ADD COLUMN fcm_accepted BIGINT NOT NULL DEFAULT 0, ADD COLUMN webpush_accepted BIGINT NOT NULL DEFAULT 0
        """,
        """
        ALTER TABLE chunk ADD COLUMN fcm_accepted BIGINT NOT NULL DEFAULT 0,
            ADD COLUMN webpush_accepted BIGINT NOT NULL DEFAULT 0, ADD COLUMN fcm_skipped BIGINT NOT NULL DEFAULT 0,
            ADD COLUMN webpush_skipped BIGINT NOT NULL DEFAULT 0
        """,
        "ALTER TABLE request_removed ADD COLUMN platform TEXT",
        """
        CREATE OR REPLACE FUNCTION pushgate_membership_removed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO request_removed (request_seq, device_id, platform)
            SELECT r.seq, OLD.device_id, \(PushPlatform.sqlName(ofStorageKey: "d.token"))
            FROM request r JOIN request_group rg ON rg.request_seq = r.seq AND rg.group_id = OLD.group_id
            JOIN device d ON d.id = OLD.device_id
            WHERE r.state < 2 AND r.device_bound >= OLD.device_id
              AND (d.state = 0 OR d.invalidated_at >= r.created_at)
            ON CONFLICT DO NOTHING;
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE OR REPLACE FUNCTION pushgate_device_removed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO request_removed (request_seq, device_id, platform)
            SELECT DISTINCT r.seq, OLD.id, \(PushPlatform.sqlName(ofStorageKey: "OLD.token"))
            FROM request r JOIN request_group rg ON rg.request_seq = r.seq
            JOIN membership m ON m.group_id = rg.group_id AND m.device_id = OLD.id
            WHERE r.state < 2 AND r.device_bound >= OLD.id
              AND (OLD.state = 0 OR OLD.invalidated_at >= r.created_at)
            ON CONFLICT DO NOTHING;
            RETURN OLD;
        END
        $$
        """,
    ]

    /// Version 5's table and triggers: a membership deleted while the device row exists, or a device
    /// deleted (its memberships go by cascade, after the row), records the device for every unfinished
    /// request of that group that counted it: within the request's bound, and valid, or invalidated since
    /// the request was stored (what a page would have sent or skipped). No foreign key to `request`: the
    /// key check would lock request rows from registry transactions, against the ledger's lock order
    /// (request, then chunks, then devices).
    static let removedTargets = [
        """
        CREATE TABLE request_removed (
            request_seq BIGINT NOT NULL,
            device_id BIGINT NOT NULL,
            PRIMARY KEY (request_seq, device_id)
        )
        """,
        """
        CREATE FUNCTION pushgate_membership_removed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO request_removed (request_seq, device_id)
            SELECT r.seq, OLD.device_id
            FROM request r JOIN request_group rg ON rg.request_seq = r.seq AND rg.group_id = OLD.group_id
            JOIN device d ON d.id = OLD.device_id
            WHERE r.state < 2 AND r.device_bound >= OLD.device_id
              AND (d.state = 0 OR d.invalidated_at >= r.created_at)
            ON CONFLICT DO NOTHING;
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE TRIGGER membership_removed_from_requests AFTER DELETE ON membership
        FOR EACH ROW EXECUTE FUNCTION pushgate_membership_removed()
        """,
        """
        CREATE FUNCTION pushgate_device_removed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO request_removed (request_seq, device_id)
            SELECT DISTINCT r.seq, OLD.id
            FROM request r JOIN request_group rg ON rg.request_seq = r.seq
            JOIN membership m ON m.group_id = rg.group_id AND m.device_id = OLD.id
            WHERE r.state < 2 AND r.device_bound >= OLD.id
              AND (OLD.state = 0 OR OLD.invalidated_at >= r.created_at)
            ON CONFLICT DO NOTHING;
            RETURN OLD;
        END
        $$
        """,
        """
        CREATE TRIGGER device_removed_from_requests BEFORE DELETE ON device
        FOR EACH ROW EXECUTE FUNCTION pushgate_device_removed()
        """,
    ]

    /// The latest schema version this build knows.
    static var latestVersion: Int { migrations.last?.version ?? 0 }
}
