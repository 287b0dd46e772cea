import FCMSimulator
import Foundation
import PushgateConfig
import PushgateCore
import Testing

/// Issue #24's failure, retried from outside: the gateway (its HTTP API, SQLite, the real FCM client with
/// its default back-off) and the FCM simulator driven through its control API. 2,000 FCM devices in a
/// group; once 500 messages are accepted, every access token is revoked and the token endpoint answers
/// 503 for 8 s. Before the fix 1,500 devices failed for good (`connect_failed`) within half a second.
@Suite("FCM token endpoint outage in the middle of a broadcast", .timeLimit(.minutes(10)))
struct FCMTokenOutageGatewayTests {
    static func fcmToken(_ index: Int) -> String {
        String(format: "outage-%05d:APA91b", index) + String(repeating: "Qx_7-kLm", count: 18)
    }

    @Test(
        "2,000 FCM devices, tokens revoked after 500 sends and the token endpoint 503 for 8 s: each delivered exactly once, none failed"
    )
    func outageMidBroadcast() async throws {
        var simulatorConfiguration = FCMSimulator.Configuration()
        simulatorConfiguration.logger = TestLogger.make("fcm-simulator")
        try await FCMSimulator.withRunning(simulatorConfiguration) { fcmSimulator in
            let directory = try TemporaryDirectory()
            let accountFile = directory.path("fcm-account.json")
            try fcmSimulator.makeServiceAccount(projectID: "outage-project").write(to: accountFile)
            var fcm = GatewayConfiguration.App.FCM(serviceAccountFile: accountFile)
            fcm.host = "127.0.0.1:\(fcmSimulator.port)"
            fcm.caFile = fcmSimulator.caCertificatePath
            // At most 400 sends in flight (4 connections of the simulator's 100 streams), not 1,600: when the
            // token comes back, every connection writes its streams at once, and the simulator (one event loop,
            // a debug build) was measured answering about 40 a second on this machine under the full suite's
            // load: 1,500 written at once were still unanswered at the client's 30 s answer timeout (failed
            // `answer_timeout`, correctly: they may have reached FCM). Real FCM answers in milliseconds; what
            // this test checks is the token outage, not the stand-in's capacity.
            fcm.maximumConnections = 4
            let control = HTTPTestClient(port: try #require(fcmSimulator.controlPort))
            try await MetricsGatewayFixture.with(fcm: fcm) { context in
                // Registered through the API, ten clients at once.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for worker in 0..<10 {
                        group.addTask {
                            for index in stride(from: worker, to: 2_000, by: 10) {
                                let path = "/v1/groups/outage/devices/\(Self.fcmToken(index))?platform=fcm"
                                let answer = try await context.http.send("PUT", path)
                                #expect(answer.status == 204)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                let faults = try await control.send(
                    "POST",
                    "/token-faults",
                    body: #"{"status": 503, "revoke_access_tokens": true, "after_accepted": 500}"#
                )
                #expect(faults.status == 200, "\(faults.text)")

                let submitted = try await context.http.send(
                    "POST",
                    "/v1/notifications",
                    body: #"{"groups": ["outage"], "payload": {"aps": {"alert": "hello"}, "n": 1}}"#
                )
                #expect(submitted.status == 202, "\(submitted.text)")
                let id = try #require(submitted.json["id"] as? String)
                // The outage lasts 8 s from the first token request it refused (counted from the fault's start,
                // a starved run could let it end before the gateway even asked for a token), then ends.
                try await eventually("the token endpoint refused a request", timeout: .seconds(180)) {
                    (try await control.send("GET", "/stats").json["tokenFaultAnswers"] as? Int ?? 0) >= 1
                }
                try await Task.sleep(for: .seconds(8))
                let during = try await context.http.send("GET", "/v1/notifications/\(id)").json
                #expect(during["failed"] as? Int == 0, "nothing failed during the outage: \(during)")
                #expect(try await control.send("DELETE", "/token-faults").status == 200)
                try await eventually("the broadcast is done", timeout: .seconds(180)) {
                    try await context.http.send("GET", "/v1/notifications/\(id)").json["state"] as? String == "done"
                }
                let report = try await context.http.send("GET", "/v1/notifications/\(id)").json
                #expect(report["targets"] as? Int == 2_000)
                #expect(report["accepted"] as? Int == 2_000)
                #expect(report["failed"] as? Int == 0, "\(report["failed_by_reason"] ?? "")")

                let stats = try await control.send("GET", "/stats").json
                #expect(stats["devices"] as? Int == 2_000, "every device got the notification")
                #expect(stats["duplicates"] as? Int == 0, "none got it twice")
                #expect(stats["accepted"] as? Int == 2_000)
                // The faults did happen in the middle: sends refused with revoked tokens, token requests
                // answered 503, and the delivery waited for the endpoint.
                #expect((stats["rejected"] as? Int ?? 0) >= 1, "\(stats)")
                #expect((stats["tokenFaultAnswers"] as? Int ?? 0) >= 1, "\(stats)")
            }
        }
    }

    @Test(
        "the token endpoint refuses the service account (invalid_grant): /readyz names the app, the devices wait, none fails"
    )
    func refusalIsAnAlarm() async throws {
        var simulatorConfiguration = FCMSimulator.Configuration()
        simulatorConfiguration.logger = TestLogger.make("fcm-simulator")
        try await FCMSimulator.withRunning(simulatorConfiguration) { fcmSimulator in
            let directory = try TemporaryDirectory()
            let accountFile = directory.path("fcm-account.json")
            try fcmSimulator.makeServiceAccount(projectID: "refused-project").write(to: accountFile)
            var fcm = GatewayConfiguration.App.FCM(serviceAccountFile: accountFile)
            fcm.host = "127.0.0.1:\(fcmSimulator.port)"
            fcm.caFile = fcmSimulator.caCertificatePath
            let control = HTTPTestClient(port: try #require(fcmSimulator.controlPort))
            try await MetricsGatewayFixture.with(fcm: fcm) { context in
                for index in 0..<20 {
                    let path = "/v1/groups/refused/devices/\(Self.fcmToken(index))?platform=fcm"
                    #expect(try await context.http.send("PUT", path).status == 204)
                }
                let faults = try await control.send("POST", "/token-faults", body: #"{"error": "invalid_grant"}"#)
                #expect(faults.status == 200, "\(faults.text)")
                let submitted = try await context.http.send(
                    "POST",
                    "/v1/notifications",
                    body: #"{"groups": ["refused"], "payload": {"aps": {"alert": "hello"}}}"#
                )
                let id = try #require(submitted.json["id"] as? String)
                try await eventually("/readyz names the app's refused credentials") {
                    let ready = try await context.http.send("GET", "/readyz")
                    let error = ready.json["error"] as? [String: Any]
                    let message = error?["message"] as? String ?? ""
                    return ready.status == 503 && error?["code"] as? String == "configuration_alarm"
                        && message.contains("app default (fcm)") && message.contains("invalid_grant")
                }
                try await eventually("every device waits") {
                    try await context.http.send("GET", "/v1/notifications/\(id)").json["pending_retries"] as? Int == 20
                }
                let report = try await context.http.send("GET", "/v1/notifications/\(id)").json
                #expect(report["failed"] as? Int == 0, "\(report)")
                #expect(report["state"] as? String != "done")
                let held = try await context.scrape().value(
                    #"pushgate_configuration_alarms_total{app="default",reason="fcm_credentials_refused",service="fcm"}"#
                )
                #expect((held ?? 0) >= 20)
                #expect(fcmSimulator.stats().sends == 0)
            }
        }
    }
}
