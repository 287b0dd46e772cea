import Foundation
import PushgateCore
import Testing

@testable import pushgate_bench

/// `pushgate-bench webpush-gateway`: what it parses, what it starts the Web Push simulator and the gateway
/// with, and how it reads the simulator's counters. No timing here.
@Suite struct WebPushGatewayOptionsTests {
    @Test("--count is both broadcasts' size unless --apns-devices says otherwise (0: Web Push only)")
    func parsesCounts() throws {
        let command = try WebPushGatewayCommand.parse(["--count", "100000"])
        #expect(command.count == 100_000 && command.apnsDevices == nil)
        // A real push service's checks, every 100th message decrypted, on the event loops.
        #expect(command.webPushDecryptEvery == 100 && command.simulatorWorkers == 0)
        let only = try WebPushGatewayCommand.parse(["--count", "20000", "--apns-devices", "0"])
        #expect(only.apnsDevices == 0)
        // The checking mode decrypts on 2 worker threads unless told otherwise.
        let checking = try WebPushGatewayCommand.parse(["--webpush-decrypt-every", "1"])
        #expect(checking.simulatorWorkers == 2)
        let told = try WebPushGatewayCommand.parse(["--webpush-decrypt-every", "1", "--webpush-workers", "0"])
        #expect(told.simulatorWorkers == 0)
        let beside = try WebPushGatewayCommand.parse(["--simulator-binary", "/tmp/other/pushgate"])
        #expect(beside.simulatorBinary == "/tmp/other/pushgate")
    }

    @Test("no browser, negative APNs devices or workers, or an external APNs host are refused")
    func refusesBadOptions() {
        #expect(throws: (any Error).self) { try WebPushGatewayCommand.parse(["--count", "0"]) }
        #expect(throws: (any Error).self) { try WebPushGatewayCommand.parse(["--apns-devices", "-1"]) }
        #expect(throws: (any Error).self) { try WebPushGatewayCommand.parse(["--webpush-workers", "-1"]) }
        #expect(throws: (any Error).self) { try WebPushGatewayCommand.parse(["--webpush-decrypt-every", "0"]) }
        #expect(throws: (any Error).self) { try WebPushGatewayCommand.parse(["--apns-host", "127.0.0.1:4443"]) }
    }

    @Test("the simulator runs one HTTP/2 origin with its workers; the gateway gets the VAPID key, subject and CA")
    func launchArguments() throws {
        let options = try WebPushGatewayCommand.parse(["--webpush-workers", "3"]).gateway
        let arguments = WebPushStandIn.arguments(options: options, workers: 3, decryptEvery: 100)
        func value(after flag: String) -> String? { arguments.firstIndex(of: flag).map { arguments[$0 + 1] } }
        #expect(arguments.first == "simulate")
        #expect(value(after: "--webpush-port") == "0")
        #expect(value(after: "--webpush-worker-threads") == "3")
        #expect(value(after: "--webpush-decrypt-every") == "100")
        #expect(arguments.contains("--webpush-http1-port=-1") && arguments.contains("--fcm-port=-1"))
        let standIn = WebPushStandIn(
            origin: "https://127.0.0.1:4321",
            controlPort: 4322,
            caPath: "/tmp/ca.pem",
            processPID: 1,
            workers: 3,
            decryptEvery: 100
        )
        #expect(standIn.description.contains("every 100th message decrypted"))
        #expect(
            standIn.gatewayArguments(vapidKeyPath: "/tmp/v.pem", connections: 8) == [
                "--app-default-webpush-vapid-key", "/tmp/v.pem", "--app-default-webpush-subject",
                "mailto:bench@pushgate.invalid", "--app-default-webpush-ca", "/tmp/ca.pem",
                "--app-default-webpush-pool-max-connections-per-origin", "8",
            ]
        )
    }

    @Test(
        "the simulator's /stats are read: requests answered, subscriptions delivered to, duplicates, messages decrypted, signatures verified"
    )
    func readsStats() {
        let stats = WebPushStandIn.stats(
            from: [
                "requests": 9, "delivered": 8, "subscriptionsDelivered": 7, "duplicates": 1, "decrypted": 2,
                "tokensVerified": 1,
            ]
        )
        #expect(
            stats
                == .init(
                    requests: 9,
                    delivered: 8,
                    subscriptionsDelivered: 7,
                    duplicates: 1,
                    decrypted: 2,
                    tokensVerified: 1
                )
        )
        #expect(stats.answered == 9)
    }
}
