import Logging
import PostgresNIO
import PushgateCore

/// Targets a page cannot see any more: members of the request's groups whose membership was deleted after
/// the request was stored (unassigned, or the device removed). The `request_removed` triggers (schema
/// version 5) record them; a page counts those in its range as skipped, unless the device is a member of
/// one of the request's groups again (then the page read it).
extension PostgresStore {
    /// Device ids in `(after, through]` recorded as removed from the request's groups and not members of
    /// any of them now, ascending, with their services (APNs for rows recorded before version 8).
    static func removedTargets(
        requestSeq: Int64,
        after: Int64,
        through: Int64,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> [(device: Int64, platform: PushPlatform)] {
        guard after < through else { return [] }
        return try await connection.all(
            """
            SELECT t.device_id, t.platform FROM request_removed t
            WHERE t.request_seq = \(requestSeq) AND t.device_id > \(after) AND t.device_id <= \(through)
              AND NOT EXISTS (
                SELECT 1 FROM request_group rg JOIN membership m ON m.group_id = rg.group_id
                WHERE rg.request_seq = t.request_seq AND m.device_id = t.device_id)
            ORDER BY t.device_id
            """,
            as: (Int64, String?).self,
            logger: logger
        ).map { (device: $0.0, platform: $0.1.flatMap(PushPlatform.init(rawValue:)) ?? .apns) }
    }

    /// A finished request's records of removed targets are no longer read.
    static func forgetRemovedTargets(requestSeq: Int64, on connection: PostgresConnection, logger: Logger) async throws
    {
        try await connection.run("DELETE FROM request_removed WHERE request_seq = \(requestSeq)", logger: logger)
    }
}
