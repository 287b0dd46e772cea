import Crypto
import Foundation
import Testing
import WebPushSimulator

/// `pushgate send --webpush`: the binary as documented, against the Web Push simulator on loopback
/// (which verifies VAPID and decrypts with the subscription's private key).
@Suite("pushgate send through Web Push", .serialized, .timeLimit(.minutes(2)))
struct WebPushSendCommandTests {
    static func send(
        to subscription: WebPushSimulatorSubscription,
        simulator: RunningWebPushSimulator,
        in directory: TemporaryDirectory
    ) throws -> (status: Int32, output: String) {
        let file = directory.path("subscription.json")
        try Data(subscription.json.utf8).write(to: URL(fileURLWithPath: file))
        let key = directory.path("vapid.pem")
        try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: key))
        return try ExternalTools.run(
            GatewayCrashTests.gatewayBinary,
            [
                "send", "--webpush", file, "--vapid-key", key, "--vapid-subject", "mailto:cli@pushgate.invalid",
                "--ca", simulator.caCertificatePath, "--payload", #"{"title":"hello from the command line"}"#,
                "--timeout", "20",
            ]
        )
    }

    @Test("one message reaches the browser, decrypted as sent, on each origin; status 201 printed; exit 0")
    func accepted() async throws {
        let directory = try TemporaryDirectory()
        try await WebPushSimulator.withRunning { simulator in
            for origin in [0, 1] {
                let subscription = try simulator.createSubscription(originIndex: origin)
                let (status, output) = try Self.send(to: subscription, simulator: simulator, in: directory)
                #expect(status == 0, "\(output)")
                #expect(output.contains("status: 201"), "\(output)")
                let received = simulator.received(subscriptionID: subscription.id)
                #expect(received.count == 1)
                #expect(received.first?.text == #"{"title":"hello from the command line"}"#)
                #expect(received.first?.vapidSubject == "mailto:cli@pushgate.invalid")
            }
        }
    }

    @Test("a gone subscription: 410 and 'subscription: gone' are printed and the exit status is 1")
    func gone() async throws {
        let directory = try TemporaryDirectory()
        try await WebPushSimulator.withRunning { simulator in
            let subscription = try simulator.createSubscription()
            try simulator.expire(subscriptionID: subscription.id, status: 410)
            let (status, output) = try Self.send(to: subscription, simulator: simulator, in: directory)
            #expect(status == 1, "\(output)")
            #expect(output.contains("status: 410"), "\(output)")
            #expect(output.contains("subscription: gone"), "\(output)")
            #expect(!output.contains(subscription.endpoint), "the endpoint is never printed whole")
        }
    }
}
