import Foundation
import Logging
import PostgresNIO
public import PushgateCore

/// Delivery reports: one request's, or many at once (the "done" lines of a group commit's requests), in
/// one statement either way.
extension PostgresStore {
    /// Accepted counts are the request's own (retries) plus its chunks' (fan-out), kept apart so that
    /// instances recording progress do not all update the request row.
    public func report(_ id: RequestID) async throws -> DeliveryReport? {
        try await reports([id]).first
    }

    /// One statement for the whole list (`id = ANY(…)`): each request's row with its chunks' sums, its
    /// newest apns-id, its pending retries, failures by reason, unknown groups and the service split as
    /// columns and arrays, all from one snapshot. In the order asked, unknown ids left out.
    public func reports(_ ids: [RequestID]) async throws -> [DeliveryReport] {
        if ids.isEmpty { return [] }
        let (fcm, webPush) = (DeviceToken.fcmStoragePrefix, DeviceToken.webPushStoragePrefix)
        let (fcmEnd, webPushEnd) = (DeviceToken.storagePrefixEnd(fcm), DeviceToken.storagePrefixEnd(webPush))
        let finished = Self.sql(Code.done)
        let rows = try await read { connection in
            try await connection.all(
                """
                SELECT r.id, r.app, r.state::BIGINT, r.target_count, r.accepted + c.accepted, r.created_at, r.finished_at,
                    CASE WHEN l.last_apns_at IS NOT NULL AND (r.last_apns_at IS NULL OR l.last_apns_at > r.last_apns_at)
                        THEN l.last_apns_id ELSE r.last_apns_id END,
                    (SELECT COUNT(*) FROM retry t WHERE t.request_seq = r.seq),
                    c.skipped,
                    ARRAY(SELECT f.reason FROM failure_count f WHERE f.request_seq = r.seq ORDER BY f.reason),
                    ARRAY(SELECT f.count FROM failure_count f WHERE f.request_seq = r.seq ORDER BY f.reason),
                    ARRAY(SELECT u.name FROM request_unknown_group u WHERE u.request_seq = r.seq ORDER BY u.position),
                    r.fcm_targets, r.webpush_targets,
                    r.fcm_accepted + c.fcm_accepted, r.webpush_accepted + c.webpush_accepted,
                    c.fcm_skipped, c.webpush_skipped,
                    CASE WHEN r.state >= \(unescaped: finished) THEN 0 ELSE (SELECT COUNT(*) FROM failure f
                        WHERE f.request_seq = r.seq AND f.token >= \(fcm) AND f.token < \(fcmEnd)) END,
                    CASE WHEN r.state >= \(unescaped: finished) THEN 0 ELSE (SELECT COUNT(*) FROM failure f
                        WHERE f.request_seq = r.seq AND f.token >= \(webPush) AND f.token < \(webPushEnd)) END
                FROM request r
                CROSS JOIN LATERAL (
                    SELECT COALESCE(SUM(accepted), 0)::BIGINT AS accepted, COALESCE(SUM(skipped), 0)::BIGINT AS skipped,
                        COALESCE(SUM(fcm_accepted), 0)::BIGINT AS fcm_accepted,
                        COALESCE(SUM(webpush_accepted), 0)::BIGINT AS webpush_accepted,
                        COALESCE(SUM(fcm_skipped), 0)::BIGINT AS fcm_skipped,
                        COALESCE(SUM(webpush_skipped), 0)::BIGINT AS webpush_skipped
                    FROM chunk WHERE request_seq = r.seq
                ) AS c
                LEFT JOIN LATERAL (
                    SELECT last_apns_id, last_apns_at FROM chunk
                    WHERE request_seq = r.seq AND last_apns_at IS NOT NULL
                    ORDER BY last_apns_at DESC, id DESC LIMIT 1
                ) AS l ON TRUE
                WHERE r.id = ANY(\(ids.map(\.value))::TEXT[])
                """,
                as: (
                    String, String, Int64, Int64, Int64, Int64, Int64?, String?, Int64, Int64, [String], [Int64],
                    [String], Int64?, Int64?, Int64, Int64, Int64, Int64, Int64, Int64
                ).self,
                logger: logger
            )
        }
        var byID = [String: DeliveryReport]()
        for row in rows {
            let failedByReason = Dictionary(
                zip(row.10, row.11.map { Int($0) }),
                uniquingKeysWith: { first, _ in first }
            )
            let state = StoredForm.requestState(row.2)
            let (targets, accepted, skipped) = (Int(row.3), Int(row.4), Int(row.9))
            let byService = ServiceSplit.read(
                finished: state.isFinished,
                totals: (targets, accepted, failedByReason.values.reduce(0, +), skipped),
                targets: row.13.map { (Int($0), Int(row.14 ?? 0)) },
                accepted: (Int(row.15), Int(row.16)),
                skipped: (Int(row.17), Int(row.18)),
                failedRows: (Int(row.19), Int(row.20))
            )
            byID[row.0] = DeliveryReport(
                id: try StoredForm.requestID(row.0),
                app: row.1,
                state: state,
                targets: targets,
                accepted: accepted,
                failedByReason: failedByReason,
                pendingRetries: Int(row.8),
                createdAt: Millis.date(row.5),
                finishedAt: row.6.map(Millis.date),
                lastAPNsID: row.7,
                unknownGroups: row.12,
                skipped: skipped,
                byService: byService
            )
        }
        return ids.compactMap { byID[$0.value] }
    }
}
