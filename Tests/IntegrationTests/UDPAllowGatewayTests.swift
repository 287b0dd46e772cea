import Foundation
import PushgateConfig
import PushgateCore
import PushgateGateway
import Testing

@Suite("The gateway's UDP ports with udp.allow: refused in the store and in /metrics")
struct UDPAllowGatewayTests {
    static let token = "be6406fe9e686c11f999c9d47e33b41be56be48f0c77570423bb89f5b51cf127"

    static func metric(_ running: Gateway.Running, _ line: String) -> Bool {
        String(decoding: running.metricsExposition(), as: UTF8.self).split(separator: "\n").contains { $0 == line }
    }

    @Test("a sender outside udp.allow changes nothing in the store and counts as refused in /metrics")
    func refusedSender() async throws {
        try await GatewayFixture.withSimulator { _, base in
            var configuration = base
            let allow = [try CIDRRange(parsing: "10.0.0.0/8")]
            configuration.udp.allow = allow
            try await GatewayFixture.run(configuration) { running, built in
                #expect(built.udp.allowedSenders == allow)
                let registration = try UDPSender(port: running.udp.registrationPort)
                registration.send(#"{"device": "\#(Self.token)", "group": "Choom"}"#)
                let notification = try UDPSender(port: running.udp.notificationPort)
                notification.send(#"{"devices": ["\#(Self.token)"], "payload": {"aps": {"alert": "hi"}}}"#)
                try await eventually("both datagrams refused") {
                    Self.metric(running, #"pushgate_udp_datagrams_refused_total{port="registration"} 1"#)
                        && Self.metric(running, #"pushgate_udp_datagrams_refused_total{port="notification"} 1"#)
                }
                let device = try await running.store.device(app: "default", token: try DeviceToken(hex: Self.token))
                #expect(device == nil, "the registration was not applied")
                #expect(Self.metric(running, #"pushgate_udp_datagrams_applied_total{port="registration"} 0"#))
                #expect(Self.metric(running, #"pushgate_udp_datagrams_applied_total{port="notification"} 0"#))
                let exposition = String(decoding: running.metricsExposition(), as: UTF8.self)
                #expect(!exposition.contains("pushgate_notification_requests_total{"), "no request was stored")
            }
        }
    }

    @Test("without udp.allow a loopback listen host accepts loopback senders only; any other, everyone")
    func defaults() async throws {
        try await GatewayFixture.withSimulator { _, base in
            var configuration = base
            configuration.listen = "127.0.0.1"
            let loopback = try Gateway.Configuration(configuration, environment: [:])
            #expect(loopback.udp.allowedSenders == CIDRRange.loopback)
            configuration.listen = "0.0.0.0"
            let everywhere = try Gateway.Configuration(configuration, environment: [:])
            #expect(everywhere.udp.allowedSenders == nil)
            // Loopback senders still reach a loopback gateway (the fixture's own datagrams).
            try await GatewayFixture.with { context in
                context.registration.send(#"{"device": "\#(Self.token)", "group": "Choom"}"#)
                try await eventually("registered") {
                    try await context.gateway.store.device(app: "default", token: try DeviceToken(hex: Self.token))
                        != nil
                }
            }
        }
    }
}
