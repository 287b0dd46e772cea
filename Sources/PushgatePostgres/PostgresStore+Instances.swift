public import Foundation
import PostgresNIO
public import PushgateCore

/// Instance heartbeats: one row per claimed id, taken over only once its expiry passed. The upsert
/// locks the row, so two processes claiming one id at once take turns and the second sees the first.
extension PostgresStore: InstanceLeases {
    public func claimInstance(_ id: InstanceID, holder: String, now: Date, timeToLive: Duration) async throws {
        let nowMs = Millis.from(now)
        let claimed = try await transaction { connection in
            try await connection.first(
                """
                INSERT INTO instance (id, holder, expires_at)
                VALUES (\(id.value), \(holder), \(nowMs + timeToLive.milliseconds))
                ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
                WHERE instance.holder = excluded.holder OR instance.expires_at <= \(nowMs)
                RETURNING id
                """,
                as: String.self,
                logger: logger
            )
        }
        guard claimed != nil else { throw StoreError.instanceIDInUse(id) }
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
