import GRDB
public import PushgateCore

/// Instance heartbeats: one row per claimed id, taken over only once its expiry passed.
extension SQLiteStore: InstanceLeases {
    public func takeInstance(_ lease: LeaseWindow, holder: String) async throws -> Bool {
        try await write { db in
            try db.cachedStatement(
                sql: """
                    INSERT INTO instance (id, holder, expires_at) VALUES (?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
                    WHERE instance.holder = excluded.holder OR instance.expires_at <= ?
                    """
            ).execute(arguments: [lease.owner.value, holder, lease.expiresAtMillis, lease.nowMillis])
            return db.changesCount > 0
        }
    }

    public func releaseInstance(_ id: InstanceID, holder: String) async throws {
        _ = try await write { db in
            try db.cachedStatement(sql: "DELETE FROM instance WHERE id = ? AND holder = ?").execute(arguments: [
                id.value, holder,
            ])
        }
    }
}
