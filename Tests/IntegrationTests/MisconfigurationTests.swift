import APNsSimulator
import FCMSimulator
import Foundation
import PushgateConfig
import PushgateCore
import PushgateGateway
import Testing

/// One wrong setting must not empty the registry: the gateway end to end (its HTTP API, the SQLite store,
/// the real clients) against the simulators answering as APNs answers tokens of the other environment, and
/// as FCM answers tokens of another Firebase project.
@Suite(
    "Misconfiguration: a wrong environment or project holds the devices instead of invalidating them",
    .timeLimit(.minutes(3))
)
struct MisconfigurationTests {
    static func token(_ index: Int) -> DeviceToken { try! DeviceToken(hex: String(format: "%064x", 0xe9e000 + index)) }
    static func fcmToken(_ index: Int) -> DeviceToken {
        try! DeviceToken(fcm: String(format: "misconfigured:APA91b-%032d", index))
    }

    struct Context: Sendable {
        var simulator: RunningAPNsSimulator
        var running: Gateway.Running
        var http: HTTPTestClient
        var store: any PushStore { running.store }

        func register(_ tokens: [DeviceToken]) async throws {
            _ = try await store.register(batch: tokens.map { Registration(token: $0, group: "G", at: Date()) })
        }

        /// A request to group G, kept for an hour (APNs's storage policy).
        func notify(_ id: String) async throws -> RequestID {
            let requestID = try RequestID(id)
            _ = try await running.intake.submit(
                NotificationRequest(
                    id: requestID,
                    groups: ["G"],
                    expiration: .storagePolicy,
                    payload: Payload(jsonString: #"{"aps":{"alert":"hi"}}"#),
                    createdAt: Date()
                )
            )
            return requestID
        }

        func readiness() async throws -> (status: Int, code: String?, message: String?) {
            let ready = try await http.send("GET", "/readyz")
            let error = ready.json["error"] as? [String: Any]
            return (ready.status, error?["code"] as? String, error?["message"] as? String)
        }

        func scrape() async throws -> PrometheusText {
            try PrometheusText(parsing: try await http.send("GET", "/metrics").text)
        }
    }

    /// The gateway with its HTTP API, probing one second after a trip (back-off up to two), with `tweak`.
    static func with(
        _ tweak: (inout GatewayConfiguration) -> Void = { _ in },
        _ body: @escaping @Sendable (Context) async throws -> Void
    ) async throws {
        try await GatewayFixture.withSimulator { simulator, configuration in
            var configuration = configuration
            configuration.http.port = 0
            configuration.misconfiguration.probeAfterSeconds = 1
            configuration.misconfiguration.probeLimitSeconds = 2
            tweak(&configuration)
            try await GatewayFixture.run(configuration) { running, _ in
                try await eventually("HTTP API listening") { running.httpPort() != nil }
                try await body(
                    Context(simulator: simulator, running: running, http: HTTPTestClient(port: running.httpPort()!))
                )
            }
        }
    }

    @Test(
        "a group of 300 sent to the wrong environment: every device stays valid, the alarm names the app and the likely cause, nothing fails; once the answers are sane, each device gets it once"
    )
    func wrongEnvironmentKeepsTheRegistry() async throws {
        try await Self.with { context in
            let tokens = (0..<300).map(Self.token)
            try await context.register(tokens)
            try context.simulator.setFaults(SimulatorFaults(everyTokenBad: true))
            let id = try await context.notify("wrong-environment")

            try await eventually("/readyz names the alarm") {
                try await context.readiness().code == "configuration_alarm"
            }
            let ready = try await context.readiness()
            #expect(ready.status == 503)
            #expect(ready.message?.contains("app default (apns)") == true, "\(ready.message ?? "")")
            #expect(ready.message?.contains("sandbox token sent to production") == true, "\(ready.message ?? "")")

            try await eventually("every device waits") { try await context.store.report(id)?.pendingRetries == 300 }
            let waiting = try #require(try await context.store.report(id))
            #expect(waiting.failed == 0, "\(waiting.failedByReason)")
            #expect(waiting.accepted == 0)
            #expect(!waiting.state.isFinished)
            for token in tokens {
                #expect(try await context.store.device(app: "default", token: token)?.state == .valid, "\(token)")
            }
            let alarmed = try await context.scrape()
            #expect(alarmed.value(#"pushgate_misconfiguration_alarm{app="default",service="apns"}"#) == 1)
            #expect(
                alarmed.value(
                    #"pushgate_misconfiguration_trips_total{app="default",cause="environment",service="apns"}"#
                )
                    == 1
            )
            #expect((alarmed.sum("pushgate_devices_invalidated_total")) == 0)
            #expect(context.simulator.stats().accepted == 0)

            // The operator fixes the environment (here: the stand-in answers sanely again); a probe finds out.
            try context.simulator.setFaults(.none)
            try await eventually("delivered after the probe") { try await context.store.report(id)?.state == .done }
            let report = try #require(try await context.store.report(id))
            #expect(report.accepted == 300)
            #expect(report.failed == 0)
            for token in tokens {
                #expect(context.simulator.deliveries(device: token.hex).accepted == 1, "\(token)")
                #expect(try await context.store.device(app: "default", token: token)?.state == .valid, "\(token)")
            }
            #expect(try await context.readiness().status == 200)
            #expect(
                try await context.scrape().value(#"pushgate_misconfiguration_alarm{app="default",service="apns"}"#) == 0
            )
        }
    }

    @Test("10 BadDeviceToken among 300 answers are genuine: those devices are invalidated as before, no alarm")
    func genuineFewStillInvalidate() async throws {
        // A short window keeps the last few answers' decision quick (they wait for it at most).
        try await Self.with({ $0.misconfiguration.windowSeconds = 3 }) { context in
            let tokens = (0..<300).map(Self.token)
            try await context.register(tokens)
            let bad = Set(stride(from: 5, to: 300, by: 30))
            for index in bad { context.simulator.markBad(Self.token(index).hex) }
            let id = try await context.notify("genuine-few")
            try await eventually("request done") { try await context.store.report(id)?.state == .done }
            let report = try #require(try await context.store.report(id))
            #expect(report.accepted == 290)
            #expect(report.failedByReason == ["BadDeviceToken": 10])
            for (index, token) in tokens.enumerated() {
                let device = try await context.store.device(app: "default", token: token)
                #expect(device?.state == (bad.contains(index) ? .invalid : .valid), "device \(index)")
            }
            #expect(try await context.readiness().status == 200)
            let metrics = try await context.scrape()
            #expect(
                metrics.value(
                    #"pushgate_devices_invalidated_total{app="default",reason="BadDeviceToken",service="apns"}"#
                )
                    == 10
            )
            #expect(metrics.sum("pushgate_misconfiguration_trips_total") == 0)
        }
    }

    @Test(
        "300 Android devices answered SENDER_ID_MISMATCH (another Firebase project): none fails, the alarm names the project; once sane, each gets it once"
    )
    func wrongFirebaseProjectKeepsTheDevices() async throws {
        var fcmConfiguration = FCMSimulator.Configuration()
        fcmConfiguration.logger = TestLogger.make("fcm-simulator")
        try await FCMSimulator.withRunning(fcmConfiguration) { fcmSimulator in
            let directory = try TemporaryDirectory()
            let accountFile = directory.path("fcm-account.json")
            try fcmSimulator.makeServiceAccount(projectID: "other-project").write(to: accountFile)
            var fcm = GatewayConfiguration.App.FCM(serviceAccountFile: accountFile)
            fcm.host = "127.0.0.1:\(fcmSimulator.port)"
            fcm.caFile = fcmSimulator.caCertificatePath
            try await Self.with({ $0.apps[0].fcm = fcm }) { context in
                let tokens = (0..<300).map(Self.fcmToken)
                try await context.register(tokens)
                fcmSimulator.inject(FCMInjectedError(errorCode: "SENDER_ID_MISMATCH", count: 1_000_000))
                let id = try await context.notify("wrong-project")

                try await eventually("/readyz names the alarm") {
                    try await context.readiness().code == "configuration_alarm"
                }
                let message = try await context.readiness().message ?? ""
                #expect(message.contains("app default (fcm)"), "\(message)")
                #expect(message.contains("another Firebase project"), "\(message)")
                try await eventually("every device waits") { try await context.store.report(id)?.pendingRetries == 300 }
                let waiting = try #require(try await context.store.report(id))
                #expect(waiting.failed == 0, "\(waiting.failedByReason)")
                for token in tokens {
                    #expect(try await context.store.device(app: "default", token: token)?.state == .valid)
                }
                #expect(
                    try await context.scrape().value(#"pushgate_misconfiguration_alarm{app="default",service="fcm"}"#)
                        == 1
                )

                fcmSimulator.reset()  // the right project: sane answers again
                try await eventually("delivered after the probe") { try await context.store.report(id)?.state == .done }
                let report = try #require(try await context.store.report(id))
                #expect(report.accepted == 300)
                #expect(report.failed == 0)
                let delivered = fcmSimulator.messages().compactMap(\.token)
                #expect(delivered.count == 300)
                #expect(Set(delivered) == Set(tokens.map(\.value)))
                #expect(try await context.readiness().status == 200)
            }
        }
    }

    @Test(
        "a retry answered BadDeviceToken in a quiet app waits for the window, then invalidates the device without sending again"
    )
    func quietRetryIsDecidedWithoutResending() async throws {
        try await Self.with({ $0.misconfiguration.windowSeconds = 2 }) { context in
            let token = Self.token(1)
            try await context.register([token])
            try context.simulator.setFaults(SimulatorFaults(rate503: 1))
            let id = try await context.notify("quiet-retry")
            try await eventually("first attempt answered 503") { context.simulator.stats().received >= 1 }
            context.simulator.markBad(token.hex)
            try context.simulator.setFaults(.none)
            try await eventually("device invalidated") {
                try await context.store.device(app: "default", token: token)?.state == .invalid
            }
            try await eventually("request done") { try await context.store.report(id)?.state == .done }
            #expect(try await context.store.report(id)?.failedByReason == ["BadDeviceToken": 1])
            #expect(context.simulator.stats().rejectedByReason["BadDeviceToken"] == 1, "answered once, not resent")
            #expect(try await context.readiness().status == 200)
        }
    }

    @Test("the gateway's dispatcher gets the misconfiguration.* thresholds; enabled false turns the breaker off")
    func configurationReachesTheDispatcher() async throws {
        try await GatewayFixture.withSimulator { _, configuration in
            var configuration = configuration
            configuration.misconfiguration.windowSeconds = 30
            configuration.misconfiguration.minimumAnswers = 40
            configuration.misconfiguration.share = 0.6
            configuration.misconfiguration.probeAfterSeconds = 7
            configuration.misconfiguration.probeLimitSeconds = 70
            configuration.misconfiguration.probeAnswers = 4
            let built = try Gateway.Configuration(configuration, environment: [:])
            #expect(
                built.dispatcher.misconfiguration
                    == MisconfigurationBreaker.Configuration(
                        window: .seconds(30),
                        minimumAnswers: 40,
                        share: 0.6,
                        probeAfter: .seconds(7),
                        probeLimit: .seconds(70),
                        probeAnswers: 4
                    )
            )
            configuration.misconfiguration.enabled = false
            #expect(try Gateway.Configuration(configuration, environment: [:]).dispatcher.misconfiguration == nil)
        }
    }
}
