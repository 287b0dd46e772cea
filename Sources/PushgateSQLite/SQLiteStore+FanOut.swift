import GRDB
import PushgateCore

/// Fan-out reads: the distinct devices of several groups, in device-id order, a page at a time.
///
/// Each target group is range-scanned on the membership primary key `(group_id, device_id)`, at most
/// `limit` rows per group from the cursor on, and the per-group lists are merged (k-way, dropping
/// duplicates). A page therefore costs O(groups × limit) index reads whatever the size of the groups,
/// where `SELECT DISTINCT … WHERE group_id IN (…) ORDER BY device_id LIMIT n` would make SQLite collect
/// and sort every remaining membership row of those groups for each page.
extension SQLiteStore {
    /// Devices of any of `groupIDs` in the scan's range: `(id, token key, skipped)`, distinct, ascending.
    /// Valid ones, and (`skipped`) those invalidated at or after `invalidatedSince` (the request's
    /// `created_at`): the request counted them as targets, so the page reports leaving them out.
    static func deviceTargets(
        groupIDs: [Int64],
        _ scan: TargetScan,
        invalidatedSince: Int64,
        in db: Database
    ) throws
        -> [TargetScan.Row]
    {
        let statement = try db.cachedStatement(
            sql: """
                SELECT m.device_id, d.token, d.state FROM membership m JOIN device d ON d.id = m.device_id
                WHERE m.group_id = ? AND m.device_id > ? AND m.device_id <= ?
                  AND (d.state = 0 OR d.invalidated_at >= ?)
                ORDER BY m.device_id LIMIT ?
                """
        )
        var lists = [[TargetScan.Row]]()
        lists.reserveCapacity(groupIDs.count)
        for groupID in groupIDs {
            var list = [TargetScan.Row]()
            let rows = try Row.fetchCursor(
                statement.bound {
                    $0.bind(groupID)
                    $0.bind(scan.after)
                    $0.bind(scan.through)
                    $0.bind(invalidatedSince)
                    $0.bind(scan.limit)
                }
            )
            while let row = try rows.next() { list.append((row[0], row[1], (row[2] as Int64) != 0)) }
            lists.append(list)
        }
        return mergeDistinct(lists, limit: scan.limit, key: \.cursor)
    }

    /// Member device ids (valid or not) in `(after, through]` of any of `groupIDs`, distinct, ascending,
    /// at most `limit`: where chunks are cut. Reads only the membership index.
    static func cutMembers(
        groupIDs: [Int64],
        _ scan: LedgerArithmetic.MemberScan,
        in db: Database
    ) throws -> (count: Int, last: Int64?) {
        let statement = try db.cachedStatement(
            sql: """
                SELECT device_id FROM membership
                WHERE group_id = ? AND device_id > ? AND device_id <= ?
                ORDER BY device_id LIMIT ?
                """
        )
        var lists = [[Int64]]()
        for groupID in groupIDs {
            lists.append(try Int64.fetchAll(statement, arguments: [groupID, scan.after, scan.bound, scan.limit]))
        }
        let ids = mergeDistinct(lists, limit: scan.limit, key: \.self)
        return (ids.count, ids.last)
    }

    /// How many distinct valid devices of `groupIDs` lie in `(after, through]`, by service, read in pages
    /// (no memory in proportion to the groups); with `invalidatedSince`, devices invalidated at or after it
    /// count too (an expiring request's targets that no page read).
    static func countDeviceTargets(
        groupIDs: [Int64],
        after: Int64,
        through: Int64,
        invalidatedSince: Int64 = .max,
        in db: Database
    ) throws -> ServiceCounts {
        guard !groupIDs.isEmpty, after < through else { return .zero }
        if groupIDs.count == 1 {
            let row = try Row.fetchOne(
                try db.cachedStatement(
                    sql: """
                        SELECT COUNT(*), COALESCE(SUM(\(platformCode("d.token")) = 1), 0),
                            COALESCE(SUM(\(platformCode("d.token")) = 2), 0)
                        FROM membership m JOIN device d ON d.id = m.device_id
                        WHERE m.group_id = ? AND m.device_id > ? AND m.device_id <= ?
                          AND (d.state = 0 OR d.invalidated_at >= ?)
                        """
                ),
                arguments: [groupIDs[0], after, through, invalidatedSince]
            )
            guard let row else { return .zero }
            return ServiceCounts(total: row[0], fcm: row[1], webpush: row[2])
        }
        let statement = try db.cachedStatement(
            sql: """
                SELECT m.device_id, \(platformCode("d.token")) FROM membership m JOIN device d ON d.id = m.device_id
                WHERE m.group_id = ? AND m.device_id > ? AND m.device_id <= ?
                  AND (d.state = 0 OR d.invalidated_at >= ?)
                ORDER BY m.device_id LIMIT ?
                """
        )
        let page = 4096
        var counts = ServiceCounts.zero
        var cursor = after
        while true {
            var lists = [[(id: Int64, platform: Int64)]]()
            for groupID in groupIDs {
                lists.append(
                    try Row.fetchAll(statement, arguments: [groupID, cursor, through, invalidatedSince, page]).map {
                        (id: $0[0], platform: $0[1])
                    }
                )
            }
            let merged = mergeDistinct(lists, limit: page, key: \.id)
            for device in merged {
                switch device.platform {
                case 1: counts.fcm += 1
                case 2: counts.webpush += 1
                default: counts.apns += 1
                }
            }
            guard merged.count == page, let last = merged.last else { return counts }
            cursor = last.id
        }
    }

    /// SQL that is 1 for an FCM storage key in `column`, 2 for a Web Push one, 0 for APNs.
    static func platformCode(_ column: String) -> String {
        "(CASE WHEN \(column) GLOB '\(DeviceToken.fcmStoragePrefix)*' THEN 1 "
            + "WHEN \(column) GLOB '\(DeviceToken.webPushStoragePrefix)*' THEN 2 ELSE 0 END)"
    }

    /// Direct-token targets of a request in the scan's positions: `(position, token key, skipped)` not
    /// covered by a target group, not known as invalid for the app, or (`skipped`) invalidated at or
    /// after `invalidatedSince`; ascending.
    static func tokenTargets(
        requestSeq: Int64,
        app: String,
        _ scan: TargetScan,
        invalidatedSince: Int64,
        in db: Database
    ) throws
        -> [TargetScan.Row]
    {
        let rows = try Row.fetchAll(
            try db.cachedStatement(
                sql: """
                    SELECT rt.position, rt.token, COALESCE(d.state, 0) FROM request_token rt
                    LEFT JOIN device d
                      ON d.token_key = \(TokenKey.sqlName)(?, rt.token) AND d.app = ? AND d.token = rt.token
                    WHERE rt.request_seq = ? AND rt.position > ? AND rt.position <= ? AND rt.covered = 0
                      AND (d.state IS NULL OR d.state = 0 OR d.invalidated_at >= ?)
                    ORDER BY rt.position LIMIT ?
                    """
            ),
            arguments: [app, app, requestSeq, scan.after, scan.through, invalidatedSince, scan.limit]
        )
        return rows.map { (cursor: $0[0] as Int64, token: $0[1] as String, skipped: ($0[2] as Int64) != 0) }
    }

    static func countTokenTargets(
        requestSeq: Int64,
        app: String,
        after: Int64,
        through: Int64,
        invalidatedSince: Int64 = .max,
        in db: Database
    ) throws
        -> Int
    {
        guard after < through else { return 0 }
        return try Int.fetchOne(
            try db.cachedStatement(
                sql: """
                    SELECT COUNT(*) FROM request_token rt
                    LEFT JOIN device d
                      ON d.token_key = \(TokenKey.sqlName)(?, rt.token) AND d.app = ? AND d.token = rt.token
                    WHERE rt.request_seq = ? AND rt.position > ? AND rt.position <= ? AND rt.covered = 0
                      AND (d.state IS NULL OR d.state = 0 OR d.invalidated_at >= ?)
                    """
            ),
            arguments: [app, app, requestSeq, after, through, invalidatedSince]
        ) ?? 0
    }

    /// Merges ascending lists into one ascending list without duplicate keys, stopping at `limit`.
    /// O(limit × lists): the number of target groups is small.
    static func mergeDistinct<Element>(_ lists: [[Element]], limit: Int, key: (Element) -> Int64) -> [Element] {
        if lists.count == 1 { return Array(lists[0].prefix(limit)) }
        var heads = [Int](repeating: 0, count: lists.count)
        var merged = [Element]()
        merged.reserveCapacity(min(limit, lists.reduce(0) { $0 + $1.count }))
        while merged.count < limit {
            var best: (list: Int, key: Int64)? = nil
            for index in lists.indices where heads[index] < lists[index].count {
                let candidate = key(lists[index][heads[index]])
                if best == nil || candidate < best!.key { best = (index, candidate) }
            }
            guard let best else { break }
            merged.append(lists[best.list][heads[best.list]])
            for index in lists.indices
            where heads[index] < lists[index].count && key(lists[index][heads[index]]) == best.key {
                heads[index] += 1
            }
        }
        return merged
    }
}
