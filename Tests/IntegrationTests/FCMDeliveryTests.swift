import APNsHTTP2
import APNsSimulator
import FCMSimulator
import FCMTransport
import Foundation
import PushTransport
import PushgateCore
import PushgateDispatch
import PushgateSQLite
import Testing

/// End to end: the dispatcher on a SQLite store, sending over the real APNs client to the APNs
/// simulator and over the real FCM client (real TLS, real HTTP/2, an RS256 access-token exchange) to
/// the FCM simulator. Both simulators' records are the oracle.
/// The time limit is a safety net, not a budget: CI runs every suite at once on two cores (issue #27).
@Suite("FCM and APNs delivery end to end", .timeLimit(.minutes(10)))
struct FCMDeliveryTests {
    static func apnsToken(_ number: Int) -> DeviceToken { SimulatorFixture.token(number) }

    /// About 160 URL-safe characters, as FCM hands them out.
    static func fcmToken(_ number: Int) -> DeviceToken {
        try! DeviceToken(fcm: "e2e-\(number):APA91b" + String(repeating: "Qx_7-kLm", count: 19))
    }

    struct Context {
        var store: SQLiteStore
        var dispatcher: Dispatcher
        var apnsSimulator: RunningAPNsSimulator
        var fcmSimulator: RunningFCMSimulator
        var fcmClient: FCMClient
        var fcm: SubmitTimesFCMTransport

        /// Submits a notification to group `mixed` and waits until the ledger says it is done.
        func notify(_ name: String, expiration: Expiration = .immediately) async throws -> DeliveryReport {
            let id = try RequestID(name)
            _ = try await dispatcher.submit(
                NotificationRequest(
                    id: id,
                    groups: ["mixed"],
                    expiration: expiration,
                    payload: Payload(jsonString: #"{"aps":{"alert":"hello"},"match":7}"#),
                    createdAt: Date()
                )
            )
            try await eventually("\(name) done", timeout: .seconds(540)) { try await store.report(id)?.state == .done }
            return try #require(try await store.report(id))
        }
    }

    /// Both simulators, both clients, and a dispatcher whose default app has both; group `mixed` holds
    /// `apnsDevices` APNs and `fcmDevices` FCM devices. The closures adjust the simulators' and clients'
    /// configurations.
    static func withBothServices(
        apnsDevices: Int,
        fcmDevices: Int,
        apnsSimulator adjustAPNsSimulator: (inout APNsSimulator.Configuration) -> Void = { _ in },
        apnsClient adjustAPNsClient: (inout APNsClient.Configuration) -> Void = { _ in },
        fcmSimulator adjustSimulator: (inout FCMSimulator.Configuration) -> Void = { _ in },
        fcmClient adjustClient: (inout FCMClient.Configuration) -> Void = { _ in },
        dispatcher adjustDispatcher: (inout Dispatcher.Configuration) -> Void = { _ in },
        _ body: (Context) async throws -> Void
    ) async throws {
        try await SimulatorFixture.with(.token, simulator: adjustAPNsSimulator, client: adjustAPNsClient) {
            apnsSimulator,
            apnsClient,
            _ in
            var fcmSimulatorConfiguration = FCMSimulator.Configuration()
            fcmSimulatorConfiguration.logger = TestLogger.make("fcm-simulator")
            adjustSimulator(&fcmSimulatorConfiguration)
            try await FCMSimulator.withRunning(fcmSimulatorConfiguration) { fcmSimulator in
                let account = try fcmSimulator.makeServiceAccount(projectID: "e2e-project")
                var fcmConfiguration = FCMClient.Configuration(
                    serviceAccount: try FCMServiceAccount(jsonBytes: account.jsonBytes),
                    host: fcmSimulator.host,
                    port: fcmSimulator.port,
                    trustRoots: .caFile(fcmSimulator.caCertificatePath)
                )
                fcmConfiguration.eventLoopThreads = 1
                fcmConfiguration.shutdownGracePeriod = .seconds(2)
                // As the APNs client's (`SimulatorFixture`): an answer read late is final, never resent.
                fcmConfiguration.requestTimeout = .seconds(120)
                adjustClient(&fcmConfiguration)
                try await FCMClient.withClient(configuration: fcmConfiguration, logger: TestLogger.make("fcm")) {
                    fcmClient in
                    let directory = try TemporaryDirectory()
                    let store = try SQLiteStore(path: directory.path("fcm-delivery.db"))
                    defer { try? store.close() }
                    let now = Date()
                    var registrations = (0..<apnsDevices).map {
                        Registration(token: apnsToken($0), group: "mixed", at: now)
                    }
                    registrations += (0..<fcmDevices).map { Registration(token: fcmToken($0), group: "mixed", at: now) }
                    _ = try await store.register(batch: registrations)
                    let fcm = SubmitTimesFCMTransport(fcmClient)
                    var configuration = Dispatcher.Configuration(instanceID: InstanceID("fcm-delivery"))
                    configuration.idleInterval = .milliseconds(50)
                    configuration.shutdownGracePeriod = .seconds(1)
                    adjustDispatcher(&configuration)
                    let dispatcher = Dispatcher(
                        store: store,
                        routes: [
                            Registration.defaultApp: DeliveryRoute(
                                transport: apnsClient,
                                topic: try Topic(SimulatorFixture.topic),
                                fcm: fcm
                            )
                        ],
                        configuration: configuration,
                        logger: TestLogger.make("dispatch")
                    )
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask { try await dispatcher.run() }
                        try await body(
                            Context(
                                store: store,
                                dispatcher: dispatcher,
                                apnsSimulator: apnsSimulator,
                                fcmSimulator: fcmSimulator,
                                fcmClient: fcmClient,
                                fcm: fcm
                            )
                        )
                        group.cancelAll()
                    }
                }
            }
        }
    }

    @Test("a group of 1,000 APNs and 1,000 FCM devices gets exactly one message per device, on the right service")
    func thousandAndThousand() async throws {
        try await Self.withBothServices(apnsDevices: 1_000, fcmDevices: 1_000) { context in
            let report = try await context.notify("mixed-2000")
            #expect(report.accepted == 2_000)
            #expect(report.failed == 0)
            let apns = context.apnsSimulator.notifications().map(\.deviceToken)
            #expect(apns.count == 1_000)
            #expect(Set(apns) == Set((0..<1_000).map { Self.apnsToken($0).hex }))
            let fcm = context.fcmSimulator.messages().compactMap(\.token)
            #expect(fcm.count == 1_000)
            #expect(Set(fcm) == Set((0..<1_000).map { Self.fcmToken($0).value }))
            #expect(context.fcmClient.accessTokensObtained == 1)
        }
    }

    @Test(
        "UNREGISTERED invalidates the device; QUOTA_EXCEEDED with Retry-After 2 is sent again >= 2 s later, delivered"
    )
    func unregisteredAndQuota() async throws {
        try await Self.withBothServices(apnsDevices: 20, fcmDevices: 20) { context in
            let dead = Self.fcmToken(3)
            let throttled = Self.fcmToken(7)
            context.fcmSimulator.markUnregistered(dead.value)
            context.fcmSimulator.inject(
                FCMInjectedError(errorCode: "QUOTA_EXCEEDED", count: 1, retryAfterSeconds: 2, token: throttled.value)
            )
            let report = try await context.notify("mixed-faults")
            #expect(report.accepted == 39)
            #expect(report.failedByReason == ["UNREGISTERED": 1])
            let device = try #require(try await context.store.device(app: "default", token: dead))
            #expect(device.state == .invalid)
            #expect(device.invalidReason == .unregistered)
            // The retry went out no earlier than Retry-After after the first attempt, and was accepted once.
            let times = context.fcm.submitTimes(to: throttled)
            #expect(times.count == 2)
            if times.count == 2 { #expect(times[1].timeIntervalSince(times[0]) >= 2) }
            #expect(context.fcmSimulator.messages(token: throttled.value).count == 1)
            #expect(context.fcmSimulator.messages(token: dead.value).isEmpty)
        }
    }

    @Test("an access token that expired at FCM is refreshed once; the next notification reaches every device")
    func expiredAccessTokenRefreshedOnce() async throws {
        try await Self.withBothServices(apnsDevices: 10, fcmDevices: 30) { context in
            #expect(try await context.notify("before-expiry").accepted == 40)
            #expect(context.fcmClient.accessTokensObtained == 1)
            context.fcmSimulator.expireAccessTokens()
            let report = try await context.notify("after-expiry")
            #expect(report.accepted == 40)
            #expect(report.failed == 0)
            #expect(context.fcmClient.accessTokensObtained == 2)
            #expect(context.fcmSimulator.messages().count == 60)
        }
    }
}
