import Foundation
import GRDB

/// What the soak asks the gateway's store at the end, after the gateway stopped.
enum SoakProbes {
    /// Per request id, its group targets that the registry invalidated after the request was stored and
    /// that have no outcome for it (no failure row, no pending retry): fan-out skips a device invalidated
    /// between enqueue and its page (`PushStore`'s contract, `FanOutChecks.fanOutSkipsInvalidDevices`),
    /// while the request's `targets` counted it. A skipped device gets no notification and no outcome,
    /// so the report's `targets - accepted - failed` counts it. Only group targets: the soak sends no
    /// direct tokens. Requests with no such device are left out. Throws when the store cannot be read.
    static func skippedInvalidated(databasePath: String, requestIDs: [String]) throws -> [String: Int] {
        guard !requestIDs.isEmpty else { return [:] }
        var configuration = GRDB.Configuration()
        configuration.readonly = true
        let queue = try DatabaseQueue(path: databasePath, configuration: configuration)
        defer { try? queue.close() }
        return try queue.read { db in
            let statement = try db.makeStatement(
                sql: """
                    SELECT COUNT(DISTINCT d.id) FROM request r
                    JOIN request_group rg ON rg.request_seq = r.seq
                    JOIN membership m ON m.group_id = rg.group_id AND m.device_id <= r.device_bound
                    JOIN device d ON d.id = m.device_id AND d.state = 1 AND d.invalidated_at >= r.created_at
                    WHERE r.id = ?
                      AND NOT EXISTS (SELECT 1 FROM failure f WHERE f.request_seq = r.seq AND f.token = d.token)
                      AND NOT EXISTS (SELECT 1 FROM retry t WHERE t.request_seq = r.seq AND t.token = d.token)
                    """
            )
            var result: [String: Int] = [:]
            for id in requestIDs {
                let count = try Int.fetchOne(statement, arguments: [id]) ?? 0
                if count > 0 { result[id] = count }
            }
            return result
        }
    }
}
