import APNsSimulator
import Crypto
import FCMSimulator
import Foundation
import PushgateConfig
import PushgateCore
import PushgateGateway
import Testing
import WebPushSimulator

/// End to end through the running gateway, built as `pushgate` builds it: one app with APNs, FCM and Web
/// Push routes to the three simulators (real TLS; HTTP/2 to APNs and FCM; for browsers one origin with
/// HTTP/2 and one HTTP/1.1 only). The simulators' records are the oracle: the Web Push simulator verifies
/// VAPID and decrypts every message with the subscription's private key, and imports nothing of ours.
/// The time limit is a safety net, not a budget: CI runs every suite at once on two cores.
@Suite("Web Push through the gateway, beside APNs and FCM", .timeLimit(.minutes(10)))
struct WebPushGatewayTests {
    static let payload = #"{"aps":{"alert":"hello"},"match":7}"#

    struct Context: Sendable {
        var gateway: Gateway.Running
        var apns: RunningAPNsSimulator
        var fcm: RunningFCMSimulator
        var webPush: RunningWebPushSimulator

        /// Stores a request to group `mixed` and waits until it is done. It expires in 10 minutes, not at
        /// once: on a loaded CI host a message still queued at the client's request timeout is retried
        /// (it was never sent) until then, instead of failing after the three attempts of an immediate one.
        func notify(_ name: String, webPush override: String? = nil) async throws -> DeliveryReport {
            let id = try RequestID(name)
            _ = try await gateway.intake.submit(
                NotificationRequest(
                    id: id,
                    groups: ["mixed"],
                    expiration: .at(epochSeconds: Int64(Date().timeIntervalSince1970) + 600),
                    payload: try Payload(jsonString: WebPushGatewayTests.payload),
                    webPush: try override.map { try WebPushOverride(jsonBytes: Array($0.utf8)) },
                    createdAt: Date()
                )
            )
            try await eventually("\(name) done", timeout: .seconds(540)) {
                try await gateway.store.report(id)?.state == .done
            }
            return try #require(try await gateway.store.report(id))
        }
    }

    static func fcmToken(_ number: Int) -> DeviceToken {
        try! DeviceToken(fcm: "webpush-e2e-\(number):APA91b" + String(repeating: "Qx_7-kLm", count: 19))
    }

    /// The gateway with the three services; group `mixed` holds `apnsDevices` APNs, `fcmDevices` FCM
    /// devices and the browsers of `subscriptions` (made by the Web Push simulator, alternating origins).
    static func withThreeServices(
        apnsDevices: Int,
        fcmDevices: Int,
        browsers: Int,
        _ body: @escaping @Sendable (Context, [WebPushSimulatorSubscription]) async throws -> Void
    ) async throws {
        try await GatewayFixture.withSimulator { apnsSimulator, configuration in
            var fcmConfiguration = FCMSimulator.Configuration()
            fcmConfiguration.logger = TestLogger.make("fcm-simulator")
            try await FCMSimulator.withRunning(fcmConfiguration) { fcmSimulator in
                var webPushConfiguration = WebPushSimulator.Configuration()
                webPushConfiguration.logger = TestLogger.make("webpush-simulator")
                try await WebPushSimulator.withRunning(webPushConfiguration) { webPushSimulator in
                    let directory = try TemporaryDirectory()
                    var configuration = configuration
                    let accountFile = directory.path("fcm-account.json")
                    try fcmSimulator.makeServiceAccount(projectID: "webpush-e2e").write(to: accountFile)
                    var fcm = GatewayConfiguration.App.FCM(serviceAccountFile: accountFile)
                    fcm.host = "\(fcmSimulator.host):\(fcmSimulator.port)"
                    fcm.caFile = fcmSimulator.caCertificatePath
                    // At most 400 FCM sends in flight (4 of the simulator's 100-stream connections), not 1,500:
                    // the simulator (one event loop, a debug build) answered too slowly under the full suite's
                    // load for 1,000 written at once, and 400 were still unanswered at the client's 30 s answer
                    // timeout (failed `answer_timeout`, correctly). What this test checks is one message per
                    // device on the right service, not the stand-in's capacity (as FCMTokenOutageGatewayTests).
                    fcm.maximumConnections = 4
                    configuration.apps[0].fcm = fcm
                    let vapidFile = directory.path("vapid.pem")
                    try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(
                        to: URL(fileURLWithPath: vapidFile)
                    )
                    var webPush = GatewayConfiguration.App.WebPush(
                        vapidKeyFile: vapidFile,
                        subject: "mailto:e2e@pushgate.invalid"
                    )
                    webPush.caFile = webPushSimulator.caCertificatePath
                    configuration.apps[0].webPush = webPush
                    let subscriptions = try (0..<browsers).map { number in
                        try webPushSimulator.createSubscription(originIndex: number % 2)
                    }
                    try await GatewayFixture.run(configuration) { running, _ in
                        let now = Date()
                        var registrations = (0..<apnsDevices).map {
                            Registration(token: SimulatorFixture.token($0), group: "mixed", at: now)
                        }
                        registrations += (0..<fcmDevices).map {
                            Registration(token: fcmToken($0), group: "mixed", at: now)
                        }
                        for subscription in subscriptions {
                            let token = DeviceToken(
                                webPush: try WebPushSubscription(jsonBytes: Array(subscription.json.utf8))
                            )
                            registrations.append(Registration(token: token, group: "mixed", at: now))
                        }
                        _ = try await running.store.register(batch: registrations)
                        let context = Context(
                            gateway: running,
                            apns: apnsSimulator,
                            fcm: fcmSimulator,
                            webPush: webPushSimulator
                        )
                        try await body(context, subscriptions)
                    }
                    _ = directory
                }
            }
        }
    }

    @Test("a group of 1,000 APNs, 1,000 FCM and 1,000 browser devices gets exactly one message each, on its service")
    func thousandOfEach() async throws {
        try await Self.withThreeServices(apnsDevices: 1_000, fcmDevices: 1_000, browsers: 1_000) {
            context,
            subscriptions in
            let report = try await context.notify("three-services-3000")
            #expect(report.accepted == 3_000)
            #expect(report.failed == 0, "\(report.failedByReason)")
            let split = try #require(report.byService)
            #expect(split.targets == ServiceCounts(apns: 1_000, fcm: 1_000, webpush: 1_000))
            #expect(split.accepted == ServiceCounts(apns: 1_000, fcm: 1_000, webpush: 1_000), "split by service")
            let apns = context.apns.notifications().map(\.deviceToken)
            #expect(apns.count == 1_000)
            #expect(Set(apns) == Set((0..<1_000).map { SimulatorFixture.token($0).hex }))
            let fcm = context.fcm.messages().compactMap(\.token)
            #expect(fcm.count == 1_000)
            #expect(Set(fcm) == Set((0..<1_000).map { Self.fcmToken($0).value }))
            let received = context.webPush.received()
            #expect(received.count == 1_000, "one message per browser, no duplicates")
            #expect(Set(received.map(\.subscriptionID)) == Set(subscriptions.map(\.id)))
            #expect(received.allSatisfy { $0.text == Self.payload }, "decrypted: the payload as written")
            #expect(Set(received.map(\.originIndex)) == [0, 1], "both origins, HTTP/2 and HTTP/1.1")
            let stats = context.webPush.stats()
            #expect(stats.http2Requests > 0 && stats.http1Requests > 0)
        }
    }

    @Test("a 404 or 410 prunes the subscription; the next notification skips it, the others get both")
    func goneSubscriptionsArePruned() async throws {
        try await Self.withThreeServices(apnsDevices: 2, fcmDevices: 2, browsers: 10) { context, subscriptions in
            try context.webPush.expire(subscriptionID: subscriptions[3].id, status: 410)
            try context.webPush.expire(subscriptionID: subscriptions[6].id, status: 404)
            let first = try await context.notify("gone-first", webPush: #"{"aps": null, "title": "Goal!"}"#)
            #expect(first.accepted == 12)
            #expect(first.failedByReason == ["webpush_410": 1, "webpush_404": 1])
            #expect(first.byService?.failed == ServiceCounts(webpush: 2), "both failures are browsers'")
            #expect(first.byService?.accepted == ServiceCounts(apns: 2, fcm: 2, webpush: 8))
            for index in [3, 6] {
                let endpoint = try DeviceToken(webPushEndpoint: subscriptions[index].endpoint)
                let device = try #require(try await context.gateway.store.device(app: "default", token: endpoint))
                #expect(device.state == .invalid, "subscription \(index) pruned")
            }
            let other = try DeviceToken(webPushEndpoint: subscriptions[4].endpoint)
            #expect(try await context.gateway.store.device(app: "default", token: other)?.state == .valid)
            #expect(
                context.webPush.received().allSatisfy { $0.text == #"{"match":7,"title":"Goal!"}"# },
                "the webpush object patched the payload"
            )
            let second = try await context.notify("gone-second")
            #expect(second.targets == 12, "the two pruned browsers are no longer targets")
            #expect(second.byService?.targets == ServiceCounts(apns: 2, fcm: 2, webpush: 8))
            #expect(second.accepted == 12)
            #expect(context.webPush.received(subscriptionID: subscriptions[3].id).isEmpty)
            #expect(context.webPush.received(subscriptionID: subscriptions[4].id).count == 2)
        }
    }

    @Test("a 429 with Retry-After is retried and then delivered, once")
    func throttledIsRetriedThenDelivered() async throws {
        try await Self.withThreeServices(apnsDevices: 1, fcmDevices: 1, browsers: 6) { context, subscriptions in
            let throttled = subscriptions[2]
            try context.webPush.script(
                WebPushScriptedAnswer(status: 429, retryAfter: "1", count: 1, subscriptionID: throttled.id)
            )
            let report = try await context.notify("throttled")
            #expect(report.accepted == 8)
            #expect(report.failed == 0, "\(report.failedByReason)")
            #expect(context.webPush.received(subscriptionID: throttled.id).count == 1, "delivered once, on the retry")
            #expect(context.webPush.stats().answeredByStatus[429] == 1)
            #expect(context.webPush.received().count == 6)
        }
    }

    @Test("/metrics: the Web Push client counts connections, answers by status, resends and VAPID tokens")
    func clientMetrics() async throws {
        try await Self.withThreeServices(apnsDevices: 1, fcmDevices: 1, browsers: 4) { context, subscriptions in
            // Browsers alternate origins: 0 and 2 on the HTTP/2 one, 1 and 3 on the HTTP/1.1 one.
            try context.webPush.expire(subscriptionID: subscriptions[0].id, status: 410)
            try context.webPush.script(
                WebPushScriptedAnswer(status: 429, retryAfter: "1", count: 1, subscriptionID: subscriptions[1].id)
            )
            try context.webPush.script(
                WebPushScriptedAnswer(status: 401, count: 1, subscriptionID: subscriptions[2].id)
            )
            let report = try await context.notify("metrics")
            #expect(report.accepted == 5 && report.failedByReason == ["webpush_410": 1])
            let text = String(decoding: context.gateway.metricsExposition(), as: UTF8.self)
            func value(_ line: String) -> Double? {
                text.split(separator: "\n").first { $0.hasPrefix(line + " ") }.flatMap {
                    Double($0.split(separator: " ").last ?? "")
                }
            }
            let app = #"app="default""#
            // 3 and the retried 1 and the resent 2: 201; then 410, 429 and 401 once each.
            #expect(value(#"pushgate_webpush_answers_total{\#(app),status="201"}"#) == 3)
            #expect(value(#"pushgate_webpush_answers_total{\#(app),status="410"}"#) == 1)
            #expect(value(#"pushgate_webpush_answers_total{\#(app),status="429"}"#) == 1)
            #expect(value(#"pushgate_webpush_answers_total{\#(app),status="401"}"#) == 1)
            #expect(value(#"pushgate_webpush_answers_total{\#(app),status="other"}"#) == 0)
            #expect(value(#"pushgate_webpush_resends_total{\#(app),cause="vapid_refused"}"#) == 1)
            #expect(value(#"pushgate_webpush_resends_total{\#(app),cause="connection_lost"}"#) == 0)
            // One token per origin, and one more for the origin that refused its first.
            #expect(value(#"pushgate_webpush_vapid_tokens_signed_total{\#(app)}"#) == 3)
            #expect((value(#"pushgate_webpush_connections_opened_total{\#(app)}"#) ?? 0) >= 2)
            #expect(value(#"pushgate_webpush_connection_failures_total{\#(app)}"#) == 0)
            #expect(value(#"pushgate_webpush_connections{\#(app)}"#) != nil)
            #expect(value(#"pushgate_webpush_requests_queued{\#(app)}"#) != nil)
            for subscription in subscriptions { #expect(!text.contains(subscription.endpoint)) }
            for origin in context.webPush.origins { #expect(!text.contains(origin), "no origin in a label") }
        }
    }
}
