/// The tables both stores create, written once and rendered in each store's SQL dialect, so that an
/// SQLite file and a PostgreSQL schema hold the same tables, columns, keys and indexes.
///
/// Released migrations render from here: never change what a released version renders (add a
/// migration in the store instead). Each store adds what only it needs in its own migrations.
package enum LedgerSchema {
    /// The SQL dialects, and how each spells what the tables need.
    package enum Dialect: Sendable {
        /// Several instances share the database: 64-bit and small integer types, identity columns.
        case postgres
        /// One process owns the file: every integer is `INTEGER`, a generated key is the rowid, and a
        /// table keyed by a composite primary key is stored in its order (`WITHOUT ROWID`).
        case sqlite

        /// 64-bit integers: times in milliseconds since 1970, ids, counts and cursors.
        var integer: String { self == .postgres ? "BIGINT" : "INTEGER" }
        /// Small integer codes: states and kinds.
        var code: String { self == .postgres ? "SMALLINT" : "INTEGER" }
        var boolean: String { self == .postgres ? "BOOLEAN" : "INTEGER" }
        var falseValue: String { self == .postgres ? "FALSE" : "0" }
        var bytes: String { self == .postgres ? "BYTEA" : "BLOB" }
        /// A 64-bit primary key the database assigns, ascending with insertion: device ids are fan-out's
        /// order and request sequence numbers its FIFO order.
        var generatedKey: String {
            self == .postgres ? "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY" : "INTEGER PRIMARY KEY"
        }
        /// What follows a table stored in its primary key's order.
        var keyedTable: String { self == .postgres ? "" : " WITHOUT ROWID" }
    }

    /// Version 1, "registry and ledger": one statement per table or index.
    package static func registryAndLedger(_ d: Dialect) -> [String] {
        registry(d) + requests(d) + work(d) + outcomes(d)
    }

    /// Version 2: the groups a request named that its app did not have.
    package static func unknownGroups(_ d: Dialect) -> String {
        """
        CREATE TABLE request_unknown_group (
            request_seq \(d.integer) NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
            position \(d.integer) NOT NULL,
            name TEXT NOT NULL,
            PRIMARY KEY (request_seq, position)
        )\(d.keyedTable)
        """
    }

    /// Idempotency keys (SQLite v8, PostgreSQL version 6): a request's key and the SHA-256 fingerprint of
    /// what the client sent under it, on the request row itself, so that the key is stored and goes with
    /// the request in the enqueue's own transaction. Unique per app among rows that have one (a partial
    /// index: requests without a key, all of UDP's, cost nothing); `idempotency_key = ?` implies the
    /// index's `IS NOT NULL`, so both planners use it for the lookup. A key used again after its window
    /// is cleared from the old row by the enqueue that takes it over.
    package static func idempotencyKeys(_ d: Dialect) -> [String] {
        [
            "ALTER TABLE request ADD COLUMN idempotency_key TEXT",
            "ALTER TABLE request ADD COLUMN idempotency_fingerprint \(d.bytes)",
            """
            CREATE UNIQUE INDEX request_by_idempotency_key ON request (app, idempotency_key)
            WHERE idempotency_key IS NOT NULL
            """,
        ]
    }

    /// Version 3: one live process per instance id.
    package static func instances(_ d: Dialect) -> String {
        "CREATE TABLE instance (id TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at \(d.integer) NOT NULL)"
    }

    private static func registry(_ d: Dialect) -> [String] {
        [
            """
            CREATE TABLE device (
                id \(d.generatedKey),
                app TEXT NOT NULL,
                token TEXT NOT NULL,
                state \(d.code) NOT NULL DEFAULT 0,
                registered_at \(d.integer) NOT NULL,
                last_registered_at \(d.integer) NOT NULL,
                invalidated_at \(d.integer),
                invalid_reason TEXT,
                UNIQUE (app, token)
            )
            """,
            """
            CREATE TABLE device_group (
                id \(d.generatedKey),
                app TEXT NOT NULL,
                name TEXT NOT NULL,
                created_at \(d.integer) NOT NULL,
                UNIQUE (app, name)
            )
            """,
            """
            CREATE TABLE membership (
                group_id \(d.integer) NOT NULL REFERENCES device_group(id) ON DELETE CASCADE,
                device_id \(d.integer) NOT NULL REFERENCES device(id) ON DELETE CASCADE,
                PRIMARY KEY (group_id, device_id)
            )\(d.keyedTable)
            """,
            "CREATE INDEX membership_by_device ON membership (device_id, group_id)",
        ]
    }

    private static func requests(_ d: Dialect) -> [String] {
        [
            """
            CREATE TABLE request (
                seq \(d.generatedKey),
                id TEXT NOT NULL UNIQUE,
                app TEXT NOT NULL,
                push_type TEXT NOT NULL,
                priority INTEGER NOT NULL,
                expiration \(d.integer),
                collapse_id TEXT,
                payload \(d.bytes) NOT NULL,
                created_at \(d.integer) NOT NULL,
                state \(d.code) NOT NULL DEFAULT 0,
                finished_at \(d.integer),
                target_count \(d.integer) NOT NULL DEFAULT 0,
                device_bound \(d.integer) NOT NULL,
                group_cut \(d.integer) NOT NULL DEFAULT 0,
                token_cut \(d.integer) NOT NULL DEFAULT 0,
                token_count \(d.integer) NOT NULL DEFAULT 0,
                cut_done \(d.boolean) NOT NULL DEFAULT \(d.falseValue),
                accepted \(d.integer) NOT NULL DEFAULT 0,
                last_apns_id TEXT
            )
            """,
            "CREATE INDEX request_unfinished ON request (seq) WHERE state < 2",
            """
            CREATE TABLE request_group (
                request_seq \(d.integer) NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                group_id \(d.integer) NOT NULL REFERENCES device_group(id),
                PRIMARY KEY (request_seq, group_id)
            )\(d.keyedTable)
            """,
            """
            CREATE TABLE request_token (
                request_seq \(d.integer) NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                position \(d.integer) NOT NULL,
                token TEXT NOT NULL,
                covered \(d.boolean) NOT NULL,
                PRIMARY KEY (request_seq, position)
            )\(d.keyedTable)
            """,
        ]
    }

    private static func work(_ d: Dialect) -> [String] {
        [
            """
            CREATE TABLE chunk (
                id \(d.generatedKey),
                request_seq \(d.integer) NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                kind \(d.code) NOT NULL,
                range_after \(d.integer) NOT NULL,
                range_through \(d.integer) NOT NULL,
                progress \(d.integer) NOT NULL,
                state \(d.code) NOT NULL DEFAULT 0,
                owner TEXT,
                lease_expires_at \(d.integer) NOT NULL,
                generation \(d.integer) NOT NULL
            )
            """,
            "CREATE INDEX chunk_by_request ON chunk (request_seq, state)",
            "CREATE INDEX chunk_open_by_lease ON chunk (lease_expires_at) WHERE state = 0",
            """
            CREATE TABLE retry (
                request_seq \(d.integer) NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                token TEXT NOT NULL,
                attempt \(d.integer) NOT NULL,
                next_attempt_at \(d.integer) NOT NULL,
                last_reason TEXT NOT NULL,
                owner TEXT,
                lease_expires_at \(d.integer) NOT NULL DEFAULT 0,
                generation \(d.integer) NOT NULL DEFAULT 0,
                PRIMARY KEY (request_seq, token)
            )\(d.keyedTable)
            """,
            "CREATE INDEX retry_due ON retry (next_attempt_at)",
        ]
    }

    private static func outcomes(_ d: Dialect) -> [String] {
        [
            """
            CREATE TABLE failure (
                request_seq \(d.integer) NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                token TEXT NOT NULL,
                reason TEXT NOT NULL,
                status INTEGER,
                failed_at \(d.integer) NOT NULL,
                PRIMARY KEY (request_seq, token)
            )\(d.keyedTable)
            """,
            """
            CREATE TABLE failure_count (
                request_seq \(d.integer) NOT NULL REFERENCES request(seq) ON DELETE CASCADE,
                reason TEXT NOT NULL,
                count \(d.integer) NOT NULL,
                PRIMARY KEY (request_seq, reason)
            )\(d.keyedTable)
            """,
        ]
    }
}
