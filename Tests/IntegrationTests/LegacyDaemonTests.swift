import APNsSimulator
import Foundation
import Logging
import PushgateCore
import PushgateSQLite
import Testing

/// `pushgate --transport legacy` as a child process, with its command-line flags, against the
/// simulator's legacy gateway and feedback ports.
@Suite("Gateway daemon over the legacy transport", .serialized, .timeLimit(.minutes(3)))
struct LegacyDaemonTests {
    static func token(_ number: Int) -> String { String(format: "%064x", 0x1e6a_d000 + number) }

    @Test(
        "--transport legacy: feedback prunes at start-up, a bad token is invalidated, every other device gets the notification once"
    )
    func daemonOverLegacy() async throws {
        let directory = try TemporaryDirectory()
        let database = directory.path("gateway.db")
        let registeredAt = Date(timeIntervalSince1970: 1_700_000_000)
        do {
            let store = try SQLiteStore(path: database, logger: Logger(label: "test.store"))
            _ = try await store.register(
                batch: try (1...200).map {
                    Registration(token: try DeviceToken(hex: Self.token($0)), group: "all", at: registeredAt)
                }
            )
            try store.close()
        }
        let authority = try SimulatorCertificateAuthority()
        let issued = try authority.issueClientCertificate(topic: "com.example.pushgate")
        try issued.write(certificateTo: directory.path("client.pem"), privateKeyTo: directory.path("client.key"))
        var configuration = APNsSimulator.Configuration()
        configuration.tls = .authority(authority)
        configuration.clientCertificateAuthorityPEM = authority.certificatePEM
        configuration.legacyPort = 0
        configuration.feedbackPort = 0
        configuration.logger = TestLogger.make("simulator")
        try await APNsSimulator.withRunning(configuration) { simulator in
            simulator.markBad(Self.token(100))
            simulator.markUnregistered(Self.token(150), at: registeredAt.addingTimeInterval(60))
            let registrationPort = ExternalTools.freeUDPPort()
            let notificationPort = ExternalTools.freeUDPPort()
            let process = SpawnedProcess()
            process.executableURL = URL(fileURLWithPath: GatewayCrashTests.gatewayBinary)
            process.arguments =
                [
                    "-f", "-d", database, "-l", "127.0.0.1", "-g", "\(registrationPort)", "-n", "\(notificationPort)",
                    "-c", directory.path("client.pem"), "-k", directory.path("client.key"), "--ca",
                    simulator.caCertificatePath!,
                    "--transport", "legacy", "--legacy-host", "127.0.0.1:\(simulator.legacyPort!)",
                    "--feedback-host", "127.0.0.1:\(simulator.feedbackPort!)", "--feedback-interval", "3600",
                    // The bad token is taken as genuine once the misconfiguration breaker's window (a minute by
                    // default) has passed without a trip; a short window keeps this test quick.
                    "--http-port=-1", "--misconfiguration-window", "2",
                ] + (ProcessInfo.processInfo.environment["PUSHGATE_TEST_LOG"].map { ["--log-level", $0] } ?? [])
            let output = OutputCollector()
            let pipe = Pipe()
            process.standardError = pipe
            process.standardOutput = FileHandle.nullDevice
            pipe.fileHandleForReading.readChunksInBackground { output.append($0) }
            try process.run()
            defer {
                if process.isRunning {
                    process.terminate()
                    process.waitUntilExit()
                }
            }
            try await eventually("the daemon is ready", timeout: .seconds(60)) {
                if !process.isRunning { throw ExternalTools.ToolError("pushgate exited early:\n\(output.text)") }
                return output.text.contains("pushgate ready")
            }
            try await eventually("the feedback poll at start-up") { output.text.contains("feedback polled") }
            #expect(output.text.contains("apns.legacy.feedback_pruned=1"), "\(output.text)")

            try UDPSender(port: notificationPort).send(
                #"{"groups": ["all"], "type": "urgent", "payload": {"aps": {"alert": "legacy"}}}"#
            )
            try await eventually("198 delivered", timeout: .seconds(60)) { simulator.legacyStats().accepted >= 198 }
            try await eventually("the request is reported done") { output.text.contains("push.accepted=198") }
            // The device the feedback pruned was invalid before the request was stored: no target, no skip.
            #expect(output.text.contains("push.skipped=0"), "the report line counts skipped targets")
            let stats = simulator.legacyStats()
            print(
                "pushgate --transport legacy: gateway accepted=\(stats.accepted) duplicates=\(stats.duplicates) error responses=\(stats.errorResponsesByStatus)"
            )
            #expect(stats.accepted == 198)
            #expect(stats.duplicates == 0)
            #expect(stats.errorResponsesByStatus == [8: 1])
            #expect(
                simulator.legacyDeliveries(device: Self.token(150)) == 0,
                "pruned by the feedback poll before the send"
            )
            process.terminate()
            process.waitUntilExit()
            let store = try SQLiteStore(path: database, logger: Logger(label: "test.store"))
            defer { try? store.close() }
            #expect(
                try await store.device(app: "default", token: DeviceToken(hex: Self.token(100)))?.invalidReason
                    == .badDeviceToken
            )
            #expect(
                try await store.device(app: "default", token: DeviceToken(hex: Self.token(150)))?.invalidReason
                    == .unregistered
            )
        }
    }
}
