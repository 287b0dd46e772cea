import FCMSimulator
import Foundation
import PushgateConfig
import PushgateCore
import Testing

@Suite("Readiness: an app with FCM configured")
struct FCMReadinessTests {
    @Test("/readyz is 503 fcm_unavailable once connecting to the app's FCM host fails, while APNs is fine")
    func readinessFollowsFCM() async throws {
        var simulatorConfiguration = FCMSimulator.Configuration()
        simulatorConfiguration.logger = TestLogger.make("fcm-simulator")
        try await FCMSimulator.withRunning(simulatorConfiguration) { fcmSimulator in
            let directory = try TemporaryDirectory()
            let accountFile = directory.path("fcm-account.json")
            try fcmSimulator.makeServiceAccount(projectID: "ready-project").write(to: accountFile)
            // The token endpoint answers; the FCM host is a port nobody listens on.
            var fcm = GatewayConfiguration.App.FCM(serviceAccountFile: accountFile)
            fcm.host = "127.0.0.1:\(ExternalTools.freeTCPPort())"
            fcm.caFile = fcmSimulator.caCertificatePath
            try await MetricsGatewayFixture.with(fcm: fcm) { context in
                #expect(try await context.http.send("GET", "/readyz").status == 200, "no attempt yet: possible")
                let device = "ready-1:APA91b" + String(repeating: "Qx_7-kLm", count: 19)
                #expect(
                    try await context.http.send("PUT", "/v1/groups/g/devices/\(device)?platform=fcm").status == 204
                )
                #expect(
                    try await context.http.send("POST", "/v1/notifications", body: #"{"groups": ["g"], "payload": {}}"#)
                        .status == 202
                )
                try await eventually("FCM connect failure makes /readyz 503") {
                    let ready = try await context.http.send("GET", "/readyz")
                    return ready.status == 503
                        && (ready.json["error"] as? [String: Any])?["code"] as? String == "fcm_unavailable"
                }
            }
        }
    }
}
