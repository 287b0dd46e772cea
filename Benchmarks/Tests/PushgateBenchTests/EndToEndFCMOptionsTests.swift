import Foundation
import PushgateCore
import Testing

@testable import pushgate_bench

/// `pushgate-bench e2e --fcm-devices`: what it parses, what it starts the FCM simulator and the
/// gateway with, and how it reports each service. No timing here.
@Suite struct EndToEndFCMOptionsTests {
    @Test("--fcm-devices with --devices 0 is an FCM-only broadcast; --rtt-ms stays one option for both services")
    func parsesFCMDevices() throws {
        let command = try EndToEndCommand.parse(["--devices", "0", "--fcm-devices", "100000", "--rtt-ms", "50"])
        #expect(command.devices == 0)
        #expect(command.fcmDevices == 100_000)
        #expect(command.gateway.rttMilliseconds == 50)
        let mixed = try EndToEndCommand.parse(["--devices", "50000", "--fcm-devices", "50000"])
        #expect(mixed.devices + mixed.fcmDevices == 100_000)
        #expect(try EndToEndCommand.parse([]).fcmDevices == 0)
    }

    @Test("no device at all, a negative count, or FCM devices with an external APNs host are refused")
    func refusesBadCounts() {
        #expect(throws: (any Error).self) { try EndToEndCommand.parse(["--devices", "0"]) }
        #expect(throws: (any Error).self) { try EndToEndCommand.parse(["--fcm-devices", "-1"]) }
        #expect(throws: (any Error).self) {
            try EndToEndCommand.parse(["--fcm-devices", "5", "--apns-host", "127.0.0.1:4443"])
        }
    }

    @Test("the FCM simulator holds answers --rtt-ms and writes its account; the gateway gets account, host and CA")
    func launchArguments() throws {
        let options = try EndToEndCommand.parse(["--fcm-devices", "10", "--rtt-ms", "50"]).gateway
        let arguments = FCMStandIn.arguments(options: options, accountPath: "/tmp/a.json", latencyMilliseconds: 50)
        func value(after flag: String) -> String? {
            arguments.firstIndex(of: flag).map { arguments[$0 + 1] }
        }
        #expect(arguments.first == "simulate")
        #expect(value(after: "--fcm-latency-ms") == "50")
        #expect(value(after: "--fcm-port") == "0")
        #expect(value(after: "--fcm-account-out") == "/tmp/a.json")
        let standIn = FCMStandIn(
            port: 4321,
            controlPort: 4322,
            caPath: "/tmp/ca.pem",
            serviceAccountPath: "/tmp/a.json"
        )
        #expect(
            standIn.gatewayArguments == [
                "--fcm-service-account", "/tmp/a.json", "--fcm-host", "127.0.0.1:4321", "--fcm-ca", "/tmp/ca.pem",
            ]
        )
    }

    @Test("the FCM simulator's /stats are read, devices and duplicates included")
    func readsStats() {
        let stats = FCMStandIn.stats(
            from: ["accepted": 7, "rejected": 1, "devices": 6, "duplicates": 1, "accessTokensIssued": 2]
        )
        #expect(stats == .init(accepted: 7, rejected: 1, devices: 6, duplicates: 1, accessTokensIssued: 2))
    }

    @Test("bench FCM tokens are valid, 152 characters and distinct")
    func fcmTokens() throws {
        let tokens = try (0..<1_000).map { try BenchDevices.fcmToken($0) }
        #expect(Set(tokens).count == 1_000)
        #expect(tokens.allSatisfy { $0.platform == .fcm && $0.value.count == 152 })
        #expect(try BenchDevices.fcmToken(999_999).value.hasSuffix("999999"))
    }

    @Test("each service is reported apart: its count, whether each device got one message, its rate")
    func reportShape() {
        var fcm = ServiceRun(service: .fcm, devices: 100)
        fcm.secondsToCount = 0.5
        fcm.secondsBeforeCount = 0.49
        fcm.accepted = 100
        fcm.rejected = 0
        fcm.distinctDevices = 100
        fcm.duplicates = 0
        #expect(fcm.everyDeviceOnce == true)
        #expect(fcm.notificationsPerSecond == 200)
        #expect(fcm.reportLine.hasPrefix("  FCM: 100 devices, accepted 100, rejected 0, distinct 100, duplicates 0"))
        #expect(fcm.reportLine.contains("(each device once)"))
        #expect(fcm.reportLine.contains("= 200/s"))
        fcm.duplicates = 1
        #expect(fcm.everyDeviceOnce == false)
        #expect(fcm.reportLine.contains("NOT each device once"))

        var apns = ServiceRun(service: .apns, devices: 100)
        apns.accepted = 100
        apns.rejected = 0
        #expect(apns.everyDeviceOnce == nil)
        #expect(apns.reportLine.contains("its simulator never counted them all"))
    }

    @Test("a run's time is its last service's last answer; a service that never counted all makes it incomplete")
    func runTakesServices() {
        var apns = ServiceRun(service: .apns, devices: 50)
        apns.secondsToCount = 0.8
        apns.secondsBeforeCount = 0.79
        var fcm = ServiceRun(service: .fcm, devices: 50)
        fcm.secondsToCount = 1.2
        fcm.secondsBeforeCount = 1.19
        var run = EndToEndRun(devices: 100)
        run.take([apns, fcm])
        #expect(run.secondsToSimulatorCount == 1.2)
        #expect(run.secondsBeforeSimulatorCount == 1.19)
        #expect(run.incomplete == nil)
        #expect(run.notificationsPerSecond.map { abs($0 - 100 / 1.2) < 1e-9 } == true)

        fcm.secondsToCount = nil
        var unfinished = EndToEndRun(devices: 100)
        unfinished.take([apns, fcm])
        #expect(unfinished.secondsToSimulatorCount == nil)
        #expect(unfinished.incomplete?.contains("FCM 50") == true)
    }
}
