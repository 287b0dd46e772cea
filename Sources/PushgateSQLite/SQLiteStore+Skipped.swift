import GRDB
import PushgateCore

/// Targets a page cannot see any more: members of the request's groups whose membership was deleted after
/// the request was stored (unassigned, or the device removed). The `request_removed` triggers (schema v6)
/// record them; a page counts those in its range as skipped, unless the device is a member of one of the
/// request's groups again (then the page read it).
extension SQLiteStore {
    /// Device ids in `(after, through]` recorded as removed from the request's groups and not members of
    /// any of them now, ascending, with their services (APNs for rows recorded before v10).
    static func removedTargets(
        requestSeq: Int64,
        after: Int64,
        through: Int64,
        in db: Database
    ) throws -> [(device: Int64, platform: PushPlatform)] {
        guard after < through else { return [] }
        return try Row.fetchAll(
            try db.cachedStatement(
                sql: """
                    SELECT t.device_id, t.platform FROM request_removed t
                    WHERE t.request_seq = ? AND t.device_id > ? AND t.device_id <= ?
                      AND NOT EXISTS (
                        SELECT 1 FROM request_group rg CROSS JOIN membership m
                        WHERE rg.request_seq = t.request_seq AND m.group_id = rg.group_id
                          AND m.device_id = t.device_id)
                    ORDER BY t.device_id
                    """
            ),
            arguments: [requestSeq, after, through]
        ).map { row in (device: row[0], platform: (row[1] as String?).flatMap(PushPlatform.init(rawValue:)) ?? .apns) }
    }

    /// A finished request's records of removed targets are no longer read.
    static func forgetRemovedTargets(requestSeq: Int64, in db: Database) throws {
        let statement = try db.cachedStatement(sql: "DELETE FROM request_removed WHERE request_seq = ?")
        try statement.execute(arguments: [requestSeq])
    }
}
