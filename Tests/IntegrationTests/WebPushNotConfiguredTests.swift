import Crypto
import Foundation
import Logging
import Prometheus
import PushTransport
import PushgateCore
import PushgateDispatch
import PushgateSQLite
import Testing

/// An app without `app.NAME.webpush.*` has no Web Push service: its browsers fail for good with a bounded
/// reason (never pruned, so they are there once Web Push is configured), and the dispatcher warns, naming
/// WEBPUSH, at most once a minute.
@Suite("Dispatcher: browsers of an app without Web Push", .timeLimit(.minutes(5)))
struct WebPushNotConfiguredTests {
    static func apnsToken(_ number: Int) -> DeviceToken {
        try! DeviceToken(hex: String(format: "%064x", 0xbe_0000 + number))
    }

    static func subscription(_ number: Int) -> DeviceToken {
        let key = P256.KeyAgreement.PrivateKey().publicKey.x963Representation
        return DeviceToken(
            webPush: try! WebPushSubscription(
                endpoint: "https://push.example.net/wpush/v2/not-configured-\(number)",
                p256dh: Base64URL.encode(Array(key)),
                auth: Base64URL.encode([UInt8](repeating: 7, count: 16))
            )
        )
    }

    @Test(
        "browsers fail with webpush_not_configured (not pruned, alarm counted, one warning naming WEBPUSH); phones are delivered"
    )
    func browsersFailAndPhonesAreDelivered() async throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteStore(path: directory.path("webpush-not-configured.db"))
        defer { try? store.close() }
        let browsers = (0..<12).map(Self.subscription)
        let now = Date()
        var registrations = (0..<10).map { Registration(token: Self.apnsToken($0), group: "mixed", at: now) }
        registrations += browsers.map { Registration(token: $0, group: "mixed", at: now) }
        _ = try await store.register(batch: registrations)
        var configuration = Dispatcher.Configuration(instanceID: InstanceID("webpush-not-configured"))
        configuration.idleInterval = .milliseconds(20)
        configuration.shutdownGracePeriod = .milliseconds(100)
        let apns = RecordingAPNsTransport()
        let registry = PrometheusCollectorRegistry()
        let warnings = CapturedLog.warnings()
        let dispatcher = Dispatcher(
            store: store,
            routes: [Registration.defaultApp: DeliveryRoute(transport: apns, topic: try Topic("com.example.mixed"))],
            configuration: configuration,
            logger: warnings.logger("pushgate.dispatch"),
            metrics: DispatchMetrics(factory: PrometheusMetricsFactory(registry: registry), latencySampleInterval: 1)
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await dispatcher.run() }
            let ids = try ["first", "second"].map { try RequestID("webpush-not-configured-\($0)") }
            for id in ids {
                _ = try await dispatcher.submit(
                    NotificationRequest(
                        id: id,
                        groups: ["mixed"],
                        payload: Payload(jsonString: #"{"aps":{"alert":"hi"}}"#),
                        createdAt: Date()
                    )
                )
                try await eventually("\(id) done") { try await store.report(id)?.state == .done }
                let report = try #require(try await store.report(id))
                #expect(report.accepted == 10)
                #expect(report.failedByReason == ["webpush_not_configured": 12])
            }
            let failures = try await store.failures(of: ids[0], after: nil, limit: 100)
            #expect(Set(failures.map(\.token)) == Set(browsers))
            #expect(try await store.device(app: "default", token: browsers[3])?.state == .valid, "not pruned")
            #expect(apns.sent.count == 20 && apns.sent.allSatisfy { $0.platform == .apns })
            let series =
                #"pushgate_configuration_alarms_total{app="default",reason="webpush_not_configured",service="webpush"}"#
            try await eventually("alarms counted") {
                try PrometheusText(parsing: registry.emitToString()).value(series) == 24
            }
            let lines = warnings.lines.filter { $0.contains("webpush_not_configured") }
            #expect(lines.count == 1, "one warning a minute, not one per request: \(lines)")
            #expect(lines.first?.contains("WEBPUSH devices of an app without WEBPUSH credentials fail") == true)
            group.cancelAll()
        }
    }
}
