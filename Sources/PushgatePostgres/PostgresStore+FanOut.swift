import Logging
import PostgresNIO
import PushgateCore

/// Fan-out reads: the distinct devices of several groups, in device-id order, a page at a time.
///
/// As in the SQLite store, each target group is range-scanned on the membership primary key
/// `(group_id, device_id)` with at most `limit` rows per group (a `LATERAL` subquery per group), and the
/// per-group lists are merged and de-duplicated by the server: a page costs O(groups × limit) index
/// reads whatever the size of the groups.
///
/// The device side of each join repeats the id range (PostgreSQL does not derive it through the join, and a
/// merge join would otherwise scan devices from the first one), and ``preferOrderedIndexScans(on:)`` keeps
/// the planner from a bitmap scan of a whole remaining range, which it picks when statistics are missing,
/// e.g. right after a bulk registration.
extension PostgresStore {
    /// For the rest of the transaction: no bitmap scans, so that range queries with `ORDER BY … LIMIT`
    /// walk the primary key in order and stop at the limit.
    static func preferOrderedIndexScans(on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.run("SELECT set_config('enable_bitmapscan', 'off', true)", logger: logger)
    }

    /// Devices of any of `groupIDs` in the scan's range: `(id, token key, skipped)`, distinct, ascending.
    /// Valid ones, and (`skipped`) those invalidated at or after `invalidatedSince` (the request's
    /// `created_at`): the request counted them as targets, so the page reports leaving them out.
    static func deviceTargets(
        groupIDs: [Int64],
        _ scan: TargetScan,
        invalidatedSince: Int64,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> [TargetScan.Row] {
        let (after, through, limit) = (scan.after, scan.through, scan.limit)
        let rows: [(Int64, String, Int64)]
        if groupIDs.count == 1 {
            rows = try await connection.all(
                """
                SELECT m.device_id, d.token, d.state::BIGINT FROM membership m JOIN device d ON d.id = m.device_id
                WHERE m.group_id = \(groupIDs[0]) AND m.device_id > \(after) AND m.device_id <= \(through)
                  AND d.id > \(after) AND d.id <= \(through) AND (d.state = 0 OR d.invalidated_at >= \(invalidatedSince))
                ORDER BY m.device_id LIMIT \(limit)
                """,
                as: (Int64, String, Int64).self,
                logger: logger
            )
        } else {
            rows = try await connection.all(
                """
                SELECT u.device_id, d.token, d.state::BIGINT FROM (
                    SELECT DISTINCT x.device_id FROM unnest(\(groupIDs)::BIGINT[]) AS g(id)
                    CROSS JOIN LATERAL (
                        SELECT m.device_id FROM membership m JOIN device d ON d.id = m.device_id
                        WHERE m.group_id = g.id AND m.device_id > \(after) AND m.device_id <= \(through)
                          AND d.id > \(after) AND d.id <= \(through)
                          AND (d.state = 0 OR d.invalidated_at >= \(invalidatedSince))
                        ORDER BY m.device_id LIMIT \(limit)
                    ) AS x
                    ORDER BY x.device_id LIMIT \(limit)
                ) AS u JOIN device d ON d.id = u.device_id
                ORDER BY u.device_id
                """,
                as: (Int64, String, Int64).self,
                logger: logger
            )
        }
        return rows.map { (cursor: $0.0, token: $0.1, skipped: $0.2 != 0) }
    }

    /// How many member ids (valid or not) of `groupIDs` lie in `(after, through]`, counting at most
    /// `limit`, and the highest of those counted: where the next chunk ends. Reads only the membership
    /// index; sends two numbers back, not the ids.
    static func cutMembers(
        groupIDs: [Int64],
        _ scan: LedgerArithmetic.MemberScan,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> (count: Int, last: Int64?) {
        let (after, through, limit) = (scan.after, scan.bound, scan.limit)
        let row: (Int64, Int64?)?
        if groupIDs.count == 1 {
            row = try await connection.first(
                """
                SELECT COUNT(*), MAX(device_id) FROM (
                    SELECT device_id FROM membership
                    WHERE group_id = \(groupIDs[0]) AND device_id > \(after) AND device_id <= \(through)
                    ORDER BY device_id LIMIT \(limit)
                ) AS s
                """,
                as: (Int64, Int64?).self,
                logger: logger
            )
        } else {
            row = try await connection.first(
                """
                SELECT COUNT(*), MAX(device_id) FROM (
                    SELECT DISTINCT x.device_id FROM unnest(\(groupIDs)::BIGINT[]) AS g(id)
                    CROSS JOIN LATERAL (
                        SELECT device_id FROM membership
                        WHERE group_id = g.id AND device_id > \(after) AND device_id <= \(through)
                        ORDER BY device_id LIMIT \(limit)
                    ) AS x
                    ORDER BY x.device_id LIMIT \(limit)
                ) AS s
                """,
                as: (Int64, Int64?).self,
                logger: logger
            )
        }
        return (Int(row?.0 ?? 0), row?.1)
    }

    /// How many distinct valid devices of `groupIDs` lie in `(after, through]`, by service; with
    /// `invalidatedSince`, devices invalidated at or after it count too (an expiring request's targets that
    /// no page read).
    static func countDeviceTargets(
        groupIDs: [Int64],
        after: Int64,
        through: Int64,
        invalidatedSince: Int64 = .max,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> ServiceCounts {
        guard !groupIDs.isEmpty, after < through else { return .zero }
        let counts: (Int64, Int64, Int64)?
        if groupIDs.count == 1 {
            counts = try await connection.first(
                """
                SELECT COUNT(*), COUNT(*) FILTER (WHERE d.token LIKE 'fcm:%'),
                    COUNT(*) FILTER (WHERE d.token LIKE 'webpush:%')
                FROM membership m JOIN device d ON d.id = m.device_id
                WHERE m.group_id = \(groupIDs[0]) AND m.device_id > \(after) AND m.device_id <= \(through)
                  AND d.id > \(after) AND d.id <= \(through) AND (d.state = 0 OR d.invalidated_at >= \(invalidatedSince))
                """,
                as: (Int64, Int64, Int64).self,
                logger: logger
            )
        } else {
            counts = try await connection.first(
                """
                SELECT COUNT(*), COUNT(*) FILTER (WHERE d.token LIKE 'fcm:%'),
                    COUNT(*) FILTER (WHERE d.token LIKE 'webpush:%')
                FROM device d
                WHERE d.id > \(after) AND d.id <= \(through) AND (d.state = 0 OR d.invalidated_at >= \(invalidatedSince))
                  AND EXISTS (SELECT 1 FROM membership m WHERE m.device_id = d.id AND m.group_id = ANY(\(groupIDs)::BIGINT[]))
                """,
                as: (Int64, Int64, Int64).self,
                logger: logger
            )
        }
        guard let counts else { return .zero }
        return ServiceCounts(total: Int(counts.0), fcm: Int(counts.1), webpush: Int(counts.2))
    }

    /// Direct-token targets of a request in the scan's positions: `(position, token key, skipped)` not
    /// covered by a target group, not known as invalid for the app, or (`skipped`) invalidated at or
    /// after `invalidatedSince`; ascending.
    static func tokenTargets(
        requestSeq: Int64,
        app: String,
        _ scan: TargetScan,
        invalidatedSince: Int64,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> [TargetScan.Row] {
        let (after, through, limit) = (scan.after, scan.through, scan.limit)
        let rows = try await connection.all(
            """
            SELECT rt.position, rt.token, COALESCE(d.state, 0)::BIGINT FROM request_token rt
            LEFT JOIN device d ON d.app = \(app) AND d.token = rt.token
            WHERE rt.request_seq = \(requestSeq) AND rt.position > \(after) AND rt.position <= \(through) AND NOT rt.covered
              AND (d.state IS NULL OR d.state = 0 OR d.invalidated_at >= \(invalidatedSince))
            ORDER BY rt.position LIMIT \(limit)
            """,
            as: (Int64, String, Int64).self,
            logger: logger
        )
        return rows.map { (cursor: $0.0, token: $0.1, skipped: $0.2 != 0) }
    }

    static func countTokenTargets(
        requestSeq: Int64,
        app: String,
        after: Int64,
        through: Int64,
        invalidatedSince: Int64 = .max,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> Int {
        guard after < through else { return 0 }
        let count = try await connection.first(
            """
            SELECT COUNT(*) FROM request_token rt
            LEFT JOIN device d ON d.app = \(app) AND d.token = rt.token
            WHERE rt.request_seq = \(requestSeq) AND rt.position > \(after) AND rt.position <= \(through) AND NOT rt.covered
              AND (d.state IS NULL OR d.state = 0 OR d.invalidated_at >= \(invalidatedSince))
            """,
            as: Int64.self,
            logger: logger
        )
        return Int(count ?? 0)
    }
}
