import Foundation
import PostgresNIO
import PushgateCore
import PushgatePostgres
import Testing

/// Two instances storing one idempotency key at the same moment: the second one's insert waits on the
/// partial unique index for the first one's transaction, and what it does next depends on how that ends.
@Suite(
    "PostgreSQL store: one idempotency key, two instances",
    .enabled(if: TestDatabase.isAvailable, TestDatabase.skipReason)
)
struct PostgresIdempotencyTests {
    static let createdAt = Date(timeIntervalSince1970: 1_800_000_000)
    static let key = try! IdempotencyKey("order-4711")
    static let body = Array(#"{"groups": ["g"], "payload": {}}"#.utf8)

    @Test(
        "a request whose key another instance is storing waits for it: answers that request if it commits, is stored if it rolls back",
        arguments: [true, false]
    )
    func keyBeingStoredElsewhere(otherCommits: Bool) async throws {
        try await TestDatabase.withFreshSchema { schema in
            let configuration = try TestDatabase.configuration(schema: schema)
            try await PostgresStore.withStore(configuration: configuration, logger: TestDatabase.quietLogger) { store in
                _ = try await store.register(
                    Registration(
                        token: try DeviceToken(hex: String(repeating: "ab", count: 32)),
                        group: "g",
                        at: Self.createdAt
                    )
                )
                let fingerprint = Idempotency(key: Self.key, requestBytes: Self.body).fingerprint
                try await TestDatabase.administer { client in
                    try await client.withConnection { other in
                        // The other instance's enqueue, its request row written and not yet committed.
                        var otherPID: Int32 = 0
                        for try await pid in try await other.query(
                            "SELECT pg_backend_pid()",
                            logger: TestDatabase.quietLogger
                        ).decode(Int32.self) {
                            otherPID = pid
                        }
                        try await other.query("BEGIN", logger: TestDatabase.quietLogger)
                        try await other.query(
                            """
                            INSERT INTO \(unescaped: schema).request (id, app, push_type, priority, payload, created_at,
                                device_bound, target_count, idempotency_key, idempotency_fingerprint)
                            VALUES ('other-instance', \(Registration.defaultApp), 'alert', 10, \(Data("{}".utf8)),
                                \(Int64(Self.createdAt.timeIntervalSince1970 * 1000)), 1, 1, \(Self.key.value), \(Data(fingerprint)))
                            """,
                            logger: TestDatabase.quietLogger
                        )
                        try await withThrowingTaskGroup(of: EnqueueResult.self) { group in
                            group.addTask {
                                try await store.enqueue(
                                    NotificationRequest(
                                        id: try RequestID("mine"),
                                        groups: ["g"],
                                        payload: try Payload(jsonString: "{}"),
                                        createdAt: Self.createdAt.addingTimeInterval(1),
                                        idempotency: Idempotency(key: Self.key, requestBytes: Self.body)
                                    )
                                )
                            }
                            try await Self.waitForABackendBlocked(by: otherPID, client)
                            try await other.query(
                                otherCommits ? "COMMIT" : "ROLLBACK",
                                logger: TestDatabase.quietLogger
                            )
                            let result = try #require(try await group.next())
                            if otherCommits {
                                #expect(result.isReplay, "the other instance's request answers")
                                #expect(result.id.value == "other-instance")
                                #expect(result.targetCount == 1)
                                #expect(try await store.request(try RequestID("mine")) == nil, "nothing stored")
                            } else {
                                #expect(!result.isReplay, "the key is free again: the request is stored")
                                #expect(result.id.value == "mine")
                                #expect(try await store.request(try RequestID("mine"))?.idempotency?.key == Self.key)
                            }
                        }
                    }
                }
            }
        }
    }

    /// Waits until a backend waits for `pid`'s transaction: the store's insert met the uncommitted row in
    /// the unique index. Polls the server's own view of it (`pg_blocking_pids`), with a deadline.
    static func waitForABackendBlocked(by pid: Int32, _ client: PostgresClient) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            var waiting = 0
            for try await count in try await client.query(
                "SELECT count(*)::BIGINT FROM pg_stat_activity WHERE \(pid) = ANY(pg_blocking_pids(pid))"
            ).decode(Int64.self) {
                waiting = Int(count)
            }
            if waiting > 0 { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("no backend waited on the other instance's uncommitted row")
    }
}
