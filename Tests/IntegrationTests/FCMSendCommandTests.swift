import FCMSimulator
import Foundation
import Testing

/// `pushgate send --fcm-token`: the binary as documented, against the FCM simulator on loopback.
@Suite("pushgate send through FCM", .serialized, .timeLimit(.minutes(2)))
struct FCMSendCommandTests {
    static let registrationToken = "cli-" + String(repeating: "Zx9_-Qw8", count: 20)

    /// Runs `pushgate send` for `token` with an account whose `token_uri` is Google's, pointed at the
    /// simulator with the FCM flags.
    static func send(
        _ token: String,
        simulator: RunningFCMSimulator,
        in directory: TemporaryDirectory
    ) throws -> (status: Int32, output: String) {
        let account = try FCMThrowawayServiceAccount(
            projectID: "cli-project",
            tokenURI: "https://oauth2.googleapis.com/token"
        )
        simulator.register(account.account)
        let file = directory.path("service-account.json")
        try account.write(to: file)
        return try ExternalTools.run(
            GatewayCrashTests.gatewayBinary,
            [
                "send", "--fcm-token", token, "--fcm-service-account", file,
                "--fcm-host", simulator.host, "--fcm-port", "\(simulator.port)",
                "--fcm-token-uri", simulator.tokenURI, "--ca", simulator.caCertificatePath,
                "--alert", "hello from the command line", "--timeout", "20",
            ]
        )
    }

    @Test("one message reaches the simulator; the answer's status and message name are printed; exit 0")
    func accepted() async throws {
        let directory = try TemporaryDirectory()
        try await FCMSimulator.withRunning { simulator in
            let (status, output) = try Self.send(Self.registrationToken, simulator: simulator, in: directory)
            #expect(status == 0, "\(output)")
            let recorded = simulator.messages(token: Self.registrationToken)
            #expect(recorded.count == 1)
            #expect(recorded.first?.messageJSON.contains("hello from the command line") == true)
            #expect(output.contains("status: 200"))
            #expect(output.contains("name: \(recorded.first?.name ?? "?")"), "\(output)")
        }
    }

    @Test("an unregistered token: FCM's error code is printed and the exit status is 1")
    func unregistered() async throws {
        let directory = try TemporaryDirectory()
        try await FCMSimulator.withRunning { simulator in
            simulator.markUnregistered(Self.registrationToken)
            let (status, output) = try Self.send(Self.registrationToken, simulator: simulator, in: directory)
            #expect(status == 1, "\(output)")
            #expect(output.contains("status: 404"))
            #expect(output.contains("error: UNREGISTERED"), "\(output)")
            #expect(!output.contains("ya29."), "the access token is never printed")
        }
    }
}
