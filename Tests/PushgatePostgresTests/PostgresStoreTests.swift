import Foundation
import Logging
import PostgresNIO
import PushgateCore
import Synchronization
import Testing

@testable import PushgatePostgres

@Suite(
    "PostgreSQL store: migrations, wake-ups, several instances",
    .enabled(if: TestDatabase.isAvailable, TestDatabase.skipReason)
)
struct PostgresStoreTests {
    static func token(_ number: Int) -> DeviceToken { try! DeviceToken(hex: String(format: "%064x", number)) }

    @Test("instances starting at once on an empty schema apply each migration once, and all of them run")
    func concurrentStartMigratesOnce() async throws {
        try await TestDatabase.withFreshSchema { schema in
            let configuration = try TestDatabase.configuration(schema: schema)
            let ready = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<4 {
                    group.addTask {
                        try await PostgresStore.withStore(
                            configuration: configuration,
                            logger: TestDatabase.quietLogger
                        ) { store in
                            // Each instance works on the schema once it is up.
                            _ = try await store.register(
                                Registration(
                                    token: Self.token(index + 1),
                                    group: "g",
                                    at: Date(timeIntervalSince1970: 1)
                                )
                            )
                            return 1
                        }
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(ready == 4)
            let migrations = try await TestDatabase.migrationVersions(schema: schema)
            #expect(migrations == PostgresSchema.migrations.map { Int32($0.version) }, "each migration recorded once")
        }
    }

    @Test("a store whose password is wrong fails to start with the server's reason, without the password")
    func wrongPasswordFailsClearly() async throws {
        var configuration = try TestDatabase.configuration(schema: TestDatabase.freshSchemaName())
        configuration.password = "definitely-not-the-password"
        do {
            try await PostgresStore.withStore(configuration: configuration, logger: TestDatabase.quietLogger) { _ in }
            Issue.record("started with a wrong password")
        } catch let error as StoreError {
            #expect(error.code == .backend)
            #expect(error.message.contains("28P01"), "SQLSTATE invalid_password: \(error.message)")
            #expect(!error.message.contains("definitely-not-the-password"))
        }
    }

    @Test("an enqueue on one instance wakes another instance's listener, which sees the same registry")
    func enqueueWakesOtherInstances() async throws {
        try await TestDatabase.withFreshSchema { schema in
            var listening = try TestDatabase.configuration(schema: schema)
            listening.listensForWork = true
            let quiet = try TestDatabase.configuration(schema: schema)
            try await PostgresStore.withStore(configuration: listening, logger: TestDatabase.quietLogger) { idle in
                let (wakes, continuation) = AsyncStream<Void>.makeStream()
                idle.onWorkAvailable { continuation.yield() }
                var iterator = wakes.makeAsyncIterator()
                // The listener wakes once when it is connected (for anything it may have missed).
                await iterator.next()
                try await PostgresStore.withStore(configuration: quiet, logger: TestDatabase.quietLogger) { busy in
                    _ = try await busy.register(
                        Registration(token: Self.token(7), group: "news", at: Date(timeIntervalSince1970: 5))
                    )
                    let seen = try await idle.device(app: Registration.defaultApp, token: Self.token(7))
                    #expect(seen?.groups == ["news"], "a registration on one instance is seen by the other")
                    _ = try await busy.enqueue(
                        NotificationRequest(
                            id: try RequestID("wake-1"),
                            groups: ["news"],
                            payload: Payload.alert("hi"),
                            createdAt: Date(timeIntervalSince1970: 6)
                        )
                    )
                }
                await iterator.next()
                let chunk = try await idle.claimChunk(
                    owner: InstanceID("idle"),
                    now: Date(timeIntervalSince1970: 7),
                    leaseDuration: .seconds(30),
                    chunkSize: 10
                )
                #expect(chunk?.requestID.value == "wake-1", "the woken instance finds the work")
            }
        }
    }

    @Test("invalidations on one instance are seen by fan-out on another")
    func invalidationsAreShared() async throws {
        try await TestDatabase.withFreshSchema { schema in
            let configuration = try TestDatabase.configuration(schema: schema)
            try await PostgresStore.withStore(configuration: configuration, logger: TestDatabase.quietLogger) { first in
                try await PostgresStore.withStore(configuration: configuration, logger: TestDatabase.quietLogger) {
                    second in
                    _ = try await first.register(
                        batch: (1...3).map {
                            Registration(token: Self.token($0), group: "g", at: Date(timeIntervalSince1970: 1))
                        }
                    )
                    _ = try await second.invalidate(
                        app: Registration.defaultApp,
                        token: Self.token(2),
                        reason: .badDeviceToken,
                        appleTimestamp: nil,
                        at: Date(timeIntervalSince1970: 2)
                    )
                    let result = try await first.enqueue(
                        NotificationRequest(
                            id: try RequestID("r"),
                            groups: ["g"],
                            payload: Payload.alert("x"),
                            createdAt: Date(timeIntervalSince1970: 3)
                        )
                    )
                    #expect(result.targetCount == 2)
                }
            }
        }
    }
}

@Suite("PostgreSQL store configuration")
struct PostgresConfigurationTests {
    @Test("a URL gives host, port, user, password, database and schema; the redacted form hides the password")
    func parsesURL() throws {
        let configuration = try PostgresStore.Configuration(
            url: "postgres://push%40gate:s3cr%2Ft@db.example:6543/pushdb?schema=tenant_1"
        )
        #expect(configuration.host == "db.example")
        #expect(configuration.port == 6543)
        #expect(configuration.username == "push@gate")
        #expect(configuration.password == "s3cr/t")
        #expect(configuration.database == "pushdb")
        #expect(configuration.schema == "tenant_1")
        #expect(configuration.tlsMode == .verifyFull(rootCertificates: nil), "a host that is not loopback")
        #expect(configuration.redactedURL == "postgres://push@gate:***@db.example:6543/pushdb?schema=tenant_1")
        #expect(!configuration.redactedURL.contains("s3cr"))
    }

    @Test("defaults: port 5432, schema public, no password, TLS on request")
    func defaults() throws {
        let configuration = try PostgresStore.Configuration(
            url: "postgresql://pushgate@localhost/pushgate?sslmode=require"
        )
        #expect(configuration.port == 5432)
        #expect(configuration.schema == "public")
        #expect(configuration.password == nil)
        #expect(configuration.requiresTLS)
        #expect(configuration.redactedURL == "postgres://pushgate@localhost:5432/pushgate")
    }

    @Test(
        "sslmode: verify-full by default off loopback, disable on loopback, and what the URL asks for",
        arguments: [
            ("postgres://u@db.example/d", PostgresStore.TLSMode.verifyFull(rootCertificates: nil)),
            ("postgres://u@10.0.0.7/d", .verifyFull(rootCertificates: nil)),
            ("postgres://u@127.0.0.1/d", .disable),
            ("postgres://u@127.3.2.1/d", .disable),
            ("postgres://u@localhost/d", .disable),
            ("postgres://u@[::1]/d", .disable),
            ("postgres://u@127.0.0.1.example/d", .verifyFull(rootCertificates: nil)),
            ("postgres://u@localhost/d?sslmode=require", .require),
            ("postgres://u@localhost/d?sslmode=verify-full", .verifyFull(rootCertificates: nil)),
            ("postgres://u@db.example/d?sslmode=disable", .disable),
            (
                "postgres://u@db.example/d?sslmode=verify-full&sslrootcert=/etc/ca.pem",
                .verifyFull(rootCertificates: "/etc/ca.pem")
            ),
            ("postgres://u@localhost/d?sslrootcert=/etc/ca.pem", .verifyFull(rootCertificates: "/etc/ca.pem")),
        ]
    )
    func tlsModeChoice(url: String, mode: PostgresStore.TLSMode) throws {
        let configuration = try PostgresStore.Configuration(url: url)
        #expect(configuration.tlsMode == mode)
        #expect(configuration.requiresTLS == (mode != .disable))
    }

    @Test(
        "bad URLs are refused with a reason that never shows the password",
        arguments: [
            ("mysql://u:hunter2@h/db", "scheme"),
            ("postgres://u:hunter2@h", "no database"),
            ("postgres://h/db", "no user"),
            ("postgres://u:hunter2@h/db?schema=Robert'); DROP", "schema"),
            ("postgres://u:hunter2@h/db?sslmode=maybe", "sslmode"),
            ("postgres://u:hunter2@h/db?sslmode=require&sslrootcert=/ca.pem", "sslrootcert needs sslmode=verify-full"),
            ("postgres://u:hunter2@h/db?colour=blue", "unknown URL parameter"),
            ("not a url at all", "expected postgres://"),
        ]
    )
    func refusesBadURLs(url: String, reason: String) {
        do {
            _ = try PostgresStore.Configuration(url: url)
            Issue.record("accepted \(url)")
        } catch let error as StoreError {
            #expect(error.code == .invalidArgument)
            #expect(error.message.contains(reason), "\(error.message)")
            #expect(!error.message.contains("hunter2"))
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }
}
