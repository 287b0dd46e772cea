import PostgresNIO
public import PushgateCore

/// Instance heartbeats: one row per claimed id, taken over only once its expiry passed. The upsert
/// locks the row, so two processes claiming one id at once take turns and the second sees the first.
extension PostgresStore: InstanceLeases {
    public func takeInstance(_ lease: LeaseWindow, holder: String) async throws -> Bool {
        try await transaction { connection in
            try await connection.first(
                """
                INSERT INTO instance (id, holder, expires_at)
                VALUES (\(lease.owner.value), \(holder), \(lease.expiresAtMillis))
                ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
                WHERE instance.holder = excluded.holder OR instance.expires_at <= \(lease.nowMillis)
                RETURNING id
                """,
                as: String.self,
                logger: logger
            ) != nil
        }
    }

    public func releaseInstance(_ id: InstanceID, holder: String) async throws {
        try await transaction { connection in
            try await connection.run(
                "DELETE FROM instance WHERE id = \(id.value) AND holder = \(holder)",
                logger: logger
            )
        }
    }
}
