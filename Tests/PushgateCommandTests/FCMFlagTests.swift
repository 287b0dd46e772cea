import PushgateConfig
import Testing

@testable import pushgate

/// How the single-app FCM flags become configuration keys: `--ca` serves an FCM stand-in named by
/// `--fcm-host` unless `--fcm-ca` is given, and never Google's own host.
@Suite("FCM flags")
struct FCMFlagTests {
    private func fcmCA(_ arguments: [String]) throws -> (value: String, flag: String)? {
        let command = try GatewayCommand.parse(arguments)
        guard let value = command.commandLine.appValues["fcm.ca"] else { return nil }
        return (value.value, value.flag)
    }

    @Test("--ca serves an FCM stand-in named by --fcm-host")
    func caServesFCMStandIn() throws {
        let ca = try fcmCA(["--fcm-service-account", "sa.json", "--fcm-host", "127.0.0.1:2199", "--ca", "ca.pem"])
        #expect(ca?.value == "ca.pem")
        #expect(ca?.flag == "--ca")
    }

    @Test("--fcm-ca wins over --ca")
    func fcmCAWins() throws {
        let ca = try fcmCA([
            "--fcm-service-account", "sa.json", "--fcm-host", "127.0.0.1:2199", "--ca", "ca.pem", "--fcm-ca", "fcm.pem",
        ])
        #expect(ca?.value == "fcm.pem")
        #expect(ca?.flag == "--fcm-ca")
    }

    @Test("without --fcm-host, --ca stays APNs's: Google's host is checked against the system store")
    func caStaysAPNsWithoutFCMHost() throws {
        #expect(try fcmCA(["--fcm-service-account", "sa.json", "--ca", "ca.pem"]) == nil)
    }
}
