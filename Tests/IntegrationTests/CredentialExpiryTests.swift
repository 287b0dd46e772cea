import APNsSimulator
import Foundation
import PushgateConfig
import PushgateCore
import PushgateGateway
import Testing

/// The gateway watches its credentials' expiry: a gauge per credential, and an expired one named on
/// `/readyz` (checked again on every reload).
@Suite("Credential expiry: metrics and readiness", .serialized, .timeLimit(.minutes(3)))
struct CredentialExpiryGatewayTests {
    @Test("an APNs certificate's expiry is a gauge; once expired, /readyz is 503 configuration_alarm naming the app")
    func certificateExpiry() async throws {
        let files = try MultiAppFiles()
        let expiring = try files.authority.issueClientCertificate(topic: "com.example.news", validFor: 5 * 86_400)
        try expiring.write(certificateTo: files.certificatePath, privateKeyTo: files.keyPath)
        let clock = ManualWallClock(Date())
        try await APNsSimulator.withRunning(files.simulatorConfiguration) { simulator in
            let path = files.directory.path("pushgate.yaml")
            let yaml = """
                listen: 127.0.0.1
                udp: {registrationPort: 0, notificationPort: 0}
                http: {port: 0}
                store: {path: \(files.directory.path("gateway.db"))}
                apps: [news]
                app:
                  news:
                    apnsHost: "127.0.0.1:\(simulator.port)"
                    ca: \(simulator.caCertificatePath!)
                    certificate: {file: \(files.certificatePath), key: \(files.keyPath)}
                """
            try Data(yaml.utf8).write(to: URL(fileURLWithPath: path))
            let configuration = try await ConfigurationLoader(commandLine: .init(configFile: path), environment: [:])
                .load()
            try await GatewayFixture.run(configuration, clock: clock) { running, _ in
                let metrics = String(decoding: running.metricsExposition(), as: UTF8.self)
                let line = metrics.split(separator: "\n").first {
                    $0.hasPrefix(#"pushgate_credential_expiry_timestamp_seconds{app="news",kind="apns_certificate"}"#)
                }
                let value = try #require(line.flatMap { Double($0.split(separator: " ").last ?? "") })
                #expect(abs(value - Date().addingTimeInterval(5 * 86_400).timeIntervalSince1970) < 600)
                let port = try #require(running.httpPort())
                #expect(try await Self.readiness(port: port).status == "200")

                clock.advance(by: 6 * 86_400)
                await running.reload()
                let (status, body) = try await Self.readiness(port: port)
                #expect(status == "503")
                #expect(
                    body.contains("configuration_alarm") && body.contains("app news apns_certificate expired"),
                    "\(body)"
                )
            }
        }
    }

    static func readiness(port: Int) async throws -> (status: String, body: String) {
        let (_, output) = try await ExternalTools.runOffPool(
            "curl",
            ["-s", "-w", "\n%{http_code}", "http://127.0.0.1:\(port)/readyz"]
        )
        let lines = output.split(separator: "\n")
        return (String(lines.last ?? ""), lines.dropLast().joined(separator: "\n"))
    }
}
