import Foundation
import PushgateCore

/// A database written by the release before FCM (SQLite schema v4, PostgreSQL schema version 3), and what
/// a store of this release must make of it once its migrations ran: every device is an APNs device, and
/// the registry and the ledger go on working, FCM devices included.
///
/// Each store's tests create the previous schema (its own migrations up to that release), write these rows
/// (``rows(bytes:yes:no:)`` in that store's dialect), open the store on it, then run ``check``.
///
/// The rows:
/// - `device`: ``validToken`` (valid, registered at ``registeredAtMillis``) and ``invalidToken`` (invalid,
///   `Unregistered` at ``invalidatedAtMillis``), both members of ``group``, both in ``app``;
/// - `request` ``requestID``: push type `alert`, priority 10, no expiration (NULL), no collapse id, payload
///   ``payloadJSON``, created at ``createdAtMillis``, state 1 (sending), `target_count` 2, `device_bound`
///   2, `group_cut` 2, `token_cut` 1, `token_count` 1, `cut_done` true, `accepted` 0; ``group`` in
///   `request_group`; ``directToken`` at position 1 of `request_token`, not covered;
/// - `retry`: ``validToken`` of the request, attempt 1, due at ``retryDueMillis``, `TooManyRequests`, unleased;
/// - `failure`: ``invalidToken`` of the request, `Unregistered`, 410, at ``invalidatedAtMillis``, and its
///   `failure_count` row (`Unregistered`, 1).
public enum PreviousRelease {
    public static let app = Registration.defaultApp
    public static let group = "g"
    public static let requestID = "old-request"
    public static let payloadJSON = #"{"aps":{"alert":"old"}}"#
    public static let validToken = Fixture.token(1).value
    public static let invalidToken = Fixture.token(2).value
    public static let directToken = Fixture.token(3).value
    public static let registeredAtMillis: Int64 = 1_800_000_000_000
    public static let invalidatedAtMillis: Int64 = 1_800_000_001_000
    public static let createdAtMillis: Int64 = 1_800_000_002_000
    public static let retryDueMillis: Int64 = 1_800_000_003_000

    /// The rows above as SQL for the previous schema, in a store's dialect: `bytes` turns UTF-8 text into a
    /// binary literal, `yes` and `no` are the boolean literals (`cut_done`, `covered`).
    public static func rows(bytes: (String) -> String, yes: String, no: String) -> [String] {
        [
            """
            INSERT INTO device (app, token, state, registered_at, last_registered_at, invalidated_at, invalid_reason)
            VALUES ('\(app)', '\(validToken)', 0, \(registeredAtMillis), \(registeredAtMillis), NULL, NULL),
                   ('\(app)', '\(invalidToken)', 1, \(registeredAtMillis), \(registeredAtMillis),
                    \(invalidatedAtMillis), 'Unregistered')
            """,
            "INSERT INTO device_group (app, name, created_at) VALUES ('\(app)', '\(group)', \(registeredAtMillis))",
            "INSERT INTO membership (group_id, device_id) SELECT g.id, d.id FROM device_group g, device d",
            """
            INSERT INTO request (id, app, push_type, priority, expiration, collapse_id, payload, created_at, state,
                                 target_count, device_bound, group_cut, token_cut, token_count, cut_done, accepted)
            VALUES ('\(requestID)', '\(app)', 'alert', 10, NULL, NULL, \(bytes(payloadJSON)),
                    \(createdAtMillis), 1, 2, 2, 2, 1, 1, \(yes), 0)
            """,
            "INSERT INTO request_group (request_seq, group_id) SELECT r.seq, g.id FROM request r, device_group g",
            """
            INSERT INTO request_token (request_seq, position, token, covered)
            SELECT seq, 1, '\(directToken)', \(no) FROM request
            """,
            """
            INSERT INTO retry (request_seq, token, attempt, next_attempt_at, last_reason)
            SELECT seq, '\(validToken)', 1, \(retryDueMillis), 'TooManyRequests' FROM request
            """,
            """
            INSERT INTO failure (request_seq, token, reason, status, failed_at)
            SELECT seq, '\(invalidToken)', 'Unregistered', 410, \(invalidatedAtMillis) FROM request
            """,
            "INSERT INTO failure_count (request_seq, reason, count) SELECT seq, 'Unregistered', 1 FROM request",
        ]
    }

    private static func date(_ millis: Int64) -> Date { Date(timeIntervalSince1970: TimeInterval(millis) / 1000) }

    /// What a store opened on the previous release's rows must answer.
    public static let check = StoreCheck("previousReleaseDataKeepsWorking", checkPreviousReleaseData)

    private static func checkPreviousReleaseData(_ store: any PushStore) async throws {
        typealias F = Fixture
        let valid = try unwrap(try await store.device(app: app, token: F.token(1)), "the valid device")
        try expectEqual(valid.token.platform, .apns, "an old device is an APNs device")
        try expectEqual(valid.state, .valid, "its state")
        try expectEqual(valid.groups, [group], "its groups")
        try expectEqual(valid.registeredAt, date(registeredAtMillis), "its registration time")
        let invalid = try unwrap(try await store.device(app: app, token: F.token(2)), "the invalid device")
        try expectEqual(invalid.state, .invalid, "the invalid device stays invalid")
        try expectEqual(invalid.invalidReason, .unregistered, "its reason")
        try expectEqual(try await store.device(app: app, token: F.fcmTwin(1)), nil, "no FCM device of that text")

        let id = F.requestID(requestID)
        try expectEqual(
            try await store.request(id),
            NotificationRequest(
                id: id,
                app: app,
                groups: [group],
                devices: [F.token(3)],
                pushType: .alert,
                priority: .immediate,
                expiration: .storagePolicy,
                payload: try Payload(jsonString: payloadJSON),
                fcm: nil,
                createdAt: date(createdAtMillis)
            ),
            "the old request reads back, direct token as APNs, without an fcm override"
        )
        try expectEqual(
            try await store.failures(of: id, after: nil, limit: 10).map(\.token),
            [F.token(2)],
            "its failure is an APNs device's"
        )
        let claims = try await store.claimRetries(
            owner: F.instanceA,
            now: date(retryDueMillis),
            leaseDuration: F.lease,
            limit: 10
        )
        try expectEqual(claims.map(\.token), [F.token(1)], "its retry is claimed, for the APNs device")
        _ = try await store.recordRetryOutcomes(
            [RetryOutcome(claim: claims[0], result: .accepted(apnsID: nil))],
            owner: F.instanceA,
            now: date(retryDueMillis)
        )
        let report = try unwrap(try await store.report(id), "the old request's report")
        try expectEqual(report.state, .done, "done once its retry is accepted")
        try expectEqual(report.accepted, 1, "accepted")
        try expectEqual(report.failedByReason, ["Unregistered": 1], "failed")
        try expectEqual(report.skipped, 0, "nothing skipped: old chunks count none")
        try expectEqual(report.byService, nil, "no split by service: its devices were not counted by service")

        // New work on the old registry: an FCM device and a browser join the old group; a request reaches
        // the three platforms.
        let joined = try await store.register(
            Registration(app: app, token: F.fcmToken(1), group: group, at: date(retryDueMillis))
        )
        try expectEqual(joined, .created, "an FCM device joins the old group")
        let browser = try await store.register(
            Registration(app: app, token: F.subscription(1), group: group, at: date(retryDueMillis))
        )
        try expectEqual(browser, .created, "a browser joins the old group")
        let override = try FCMOverride(jsonBytes: Array(#"{"android":{"priority":"high"}}"#.utf8))
        let webPush = try WebPushOverride(jsonBytes: Array(#"{"aps":null,"title":"t"}"#.utf8))
        var request = F.request("new-request", groups: [group], at: 10)
        request.fcm = override
        request.webPush = webPush
        try expectEqual(try await store.enqueue(request).targetCount, 3, "the valid APNs, the FCM and the browser")
        let sent = try await F.deliverAll(store, now: F.at(11))
        try expectEqual(Set(sent), [F.token(1), F.fcmToken(1), F.subscription(1)], "fan-out reaches every platform")
        let stored = try await store.request(request.id)
        try expectEqual(stored?.fcm, override, "the new request keeps its fcm override")
        try expectEqual(stored?.webPush, webPush, "and its webpush override")
        let split = try unwrap(try await store.report(request.id)?.byService, "a new request has the split")
        try expectEqual(split.accepted, ServiceCounts(apns: 1, fcm: 1, webpush: 1), "one accepted on each service")
    }
}
