/// The PostgreSQL schema: the SQLite tables (see `SQLiteSchema`) with what several instances need.
///
/// Migrations are numbered; each runs once, in order, in the transaction that records it in
/// `pushgate_migration`. The whole migration runs under a transaction-scoped advisory lock, so that
/// instances starting at the same time take turns: the first applies, the others find the work done.
/// Never edit a released migration: add one.
///
/// Differences from SQLite, all for several writers:
/// - `chunk.last_apns_id`, `chunk.last_apns_at`: like `chunk.accepted` (which both stores keep: fan-out
///   counts on the chunk row, which only its holder writes, retries' on the request row; the report sums
///   them), the latest apns-id of a chunk's progress lives on the chunk row instead of on the request row
///   that every instance's progress would otherwise update (a hot row).
/// - Ids come from identity sequences. A sequence value may commit late, so the bound a request takes at
///   enqueue can leave out a device registered in the same instant (never include one registered later).
///
/// Token columns hold `DeviceToken.storageKey` (APNs hex, `fcm:` and an FCM registration token), as in
/// SQLite: schemas older than version 4 hold only hex, which reads back as APNs devices unchanged.
/// Version 4 adds `request.fcm`, the request's `fcm` override (JSON bytes, NULL without one).
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
            statements: [
                """
                CREATE TABLE device (
                    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    app TEXT NOT NULL,
                    token TEXT NOT NULL,
                    state SMALLINT NOT NULL DEFAULT 0,
                    registered_at BIGINT NOT NULL,
                    last_registered_at BIGINT NOT NULL,
                    invalidated_at BIGINT,
                    invalid_reason TEXT,
                    UNIQUE (app, token)
                )
                """,
                """
                CREATE TABLE device_group (
                    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    app TEXT NOT NULL,
                    name TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    UNIQUE (app, name)
                )
                """,
                """
                CREATE TABLE membership (
                    group_id BIGINT NOT NULL REFERENCES device_group(id) ON DELETE CASCADE,
                    device_id BIGINT NOT NULL REFERENCES device(id) ON DELETE CASCADE,
                    PRIMARY KEY (group_id, device_id)
                )
                """,
                "CREATE INDEX membership_by_device ON membership (device_id, group_id)",
                """
                CREATE TABLE request (
                    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    id TEXT NOT NULL UNIQUE,
                    app TEXT NOT NULL,
                    push_type TEXT NOT NULL,
                    priority INTEGER NOT NULL,
                    expiration BIGINT,
                    collapse_id TEXT,
                    payload BYTEA NOT NULL,
                    created_at BIGINT NOT NULL,
                    state SMALLINT NOT NULL DEFAULT 0,
                    finished_at BIGINT,
                    target_count BIGINT NOT NULL DEFAULT 0,
                    device_bound BIGINT NOT NULL,
                    group_cut BIGINT NOT NULL DEFAULT 0,
                    token_cut BIGINT NOT NULL DEFAULT 0,
                    token_count BIGINT NOT NULL DEFAULT 0,
                    cut_done BOOLEAN NOT NULL DEFAULT FALSE,
                    accepted BIGINT NOT NULL DEFAULT 0,
                    last_apns_id TEXT,
                    last_apns_at BIGINT
                )
                """,
                "CREATE INDEX request_unfinished ON request (seq) WHERE state < 2",
                """
                CREATE TABLE request_group (
                    request_seq BIGINT NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                    group_id BIGINT NOT NULL REFERENCES device_group(id),
                    PRIMARY KEY (request_seq, group_id)
                )
                """,
                """
                CREATE TABLE request_token (
                    request_seq BIGINT NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                    position BIGINT NOT NULL,
                    token TEXT NOT NULL,
                    covered BOOLEAN NOT NULL,
                    PRIMARY KEY (request_seq, position)
                )
                """,
                """
                CREATE TABLE chunk (
                    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    request_seq BIGINT NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                    kind SMALLINT NOT NULL,
                    range_after BIGINT NOT NULL,
                    range_through BIGINT NOT NULL,
                    progress BIGINT NOT NULL,
                    state SMALLINT NOT NULL DEFAULT 0,
                    owner TEXT,
                    lease_expires_at BIGINT NOT NULL,
                    generation BIGINT NOT NULL,
                    accepted BIGINT NOT NULL DEFAULT 0,
                    last_apns_id TEXT,
                    last_apns_at BIGINT
                )
                """,
                "CREATE INDEX chunk_by_request ON chunk (request_seq, state)",
                "CREATE INDEX chunk_open_by_lease ON chunk (lease_expires_at) WHERE state = 0",
                "CREATE INDEX chunk_open_by_owner ON chunk (owner) WHERE state = 0",
                """
                CREATE TABLE retry (
                    request_seq BIGINT NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                    token TEXT NOT NULL,
                    attempt BIGINT NOT NULL,
                    next_attempt_at BIGINT NOT NULL,
                    last_reason TEXT NOT NULL,
                    owner TEXT,
                    lease_expires_at BIGINT NOT NULL DEFAULT 0,
                    generation BIGINT NOT NULL DEFAULT 0,
                    PRIMARY KEY (request_seq, token)
                )
                """,
                "CREATE INDEX retry_due ON retry (next_attempt_at)",
                "CREATE INDEX retry_by_owner ON retry (owner) WHERE owner IS NOT NULL",
                """
                CREATE TABLE failure (
                    request_seq BIGINT NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                    token TEXT NOT NULL,
                    reason TEXT NOT NULL,
                    status INTEGER,
                    failed_at BIGINT NOT NULL,
                    PRIMARY KEY (request_seq, token)
                )
                """,
                """
                CREATE TABLE failure_count (
                    request_seq BIGINT NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                    reason TEXT NOT NULL,
                    count BIGINT NOT NULL,
                    PRIMARY KEY (request_seq, reason)
                )
                """,
            ]
        ),
        Migration(
            version: 2,
            name: "unknown groups of a request",
            statements: [
                """
                CREATE TABLE request_unknown_group (
                    request_seq BIGINT NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                    position BIGINT NOT NULL,
                    name TEXT NOT NULL,
                    PRIMARY KEY (request_seq, position)
                )
                """
            ]
        ),
        Migration(
            version: 3,
            name: "instance heartbeats",
            statements: [
                "CREATE TABLE instance (id TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at BIGINT NOT NULL)"
            ]
        ),
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
    ]

    /// The latest schema version this build knows.
    static var latestVersion: Int { migrations.last?.version ?? 0 }
}
