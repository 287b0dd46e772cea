import APNsSimulator
import Foundation
import Testing

/// The control API over real HTTP/1.1 (curl as the client).
@Suite("Control API", .enabled(if: executableExists("/usr/bin/curl"), "needs /usr/bin/curl"))
struct ControlAPITests {
    static func configuration() -> APNsSimulator.Configuration {
        var configuration = APNsSimulator.Configuration()
        configuration.controlPort = 0
        return configuration
    }

    struct HTTPResult {
        var status: Int
        var json: Any?
    }

    static func call(
        _ simulator: RunningAPNsSimulator,
        _ method: String,
        _ path: String,
        body: String? = nil
    ) async throws -> HTTPResult {
        var arguments = [
            "-s", "-X", method, "-w", "\n%{http_code}", "http://127.0.0.1:\(simulator.controlPort!)\(path)",
        ]
        if let body { arguments += ["-H", "content-type: application/json", "--data-binary", body] }
        let result = try await run("/usr/bin/curl", arguments)
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        let status = Int(lines.last ?? "") ?? 0
        let text = lines.dropLast().joined(separator: "\n")
        let json = try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        return HTTPResult(status: status, json: json)
    }

    @Test func notificationsAndStatsReflectWhatWasPushed() async throws {
        try await withSimulatorAndProbe(Self.configuration()) { simulator, probe in
            _ = try await probe.send([
                .push(token: deviceToken(1), headers: alertHeaders(), payload: #"{"aps":{"alert":"one"}}"#),
                .push(token: deviceToken(2), headers: alertHeaders()),
                .push(token: deviceToken(2), headers: []),
            ])
            let all = try await Self.call(simulator, "GET", "/notifications")
            #expect(all.status == 200)
            #expect((all.json as? [[String: Any]])?.count == 2)
            let one = try await Self.call(simulator, "GET", "/notifications?device=\(deviceToken(1))")
            let records = try #require(one.json as? [[String: Any]])
            #expect(records.count == 1)
            #expect(records.first?["device"] as? String == deviceToken(1))
            #expect(
                ((records.first?["payload"] as? [String: Any])?["aps"] as? [String: Any])?["alert"] as? String == "one"
            )
            #expect((records.first?["headers"] as? [String: String])?["apns-topic"] == bundleID)

            let stats = try #require(try await Self.call(simulator, "GET", "/stats").json as? [String: Any])
            #expect(stats["accepted"] as? Int == 2)
            #expect(stats["rejected"] as? Int == 1)
            #expect((stats["rejected_by_reason"] as? [String: Int]) == ["MissingTopic": 1])
            #expect(stats["connections_active"] as? Int == 1)
        }
    }

    @Test func devicesCanBeMarkedUnregisteredAndBad() async throws {
        try await withSimulatorAndProbe(Self.configuration()) { simulator, probe in
            let marked = try await Self.call(
                simulator,
                "POST",
                "/devices/\(deviceToken(1))/unregister",
                body: #"{"timestamp": 1700000000123}"#
            )
            #expect(marked.status == 200)
            #expect((marked.json as? [String: Any])?["state"] as? String == "unregistered")
            let gone = try #require(
                try await probe.send(.push(token: deviceToken(1), headers: alertHeaders())).response
            )
            #expect(gone.status == 410)
            #expect(gone.timestamp == 1_700_000_000_123)

            #expect(try await Self.call(simulator, "POST", "/devices/\(deviceToken(2))/unregister").status == 200)
            #expect(try await probe.send(.push(token: deviceToken(2), headers: alertHeaders())).response?.status == 410)

            #expect(try await Self.call(simulator, "POST", "/devices/\(deviceToken(3))/bad").status == 200)
            #expect(
                try await probe.send(.push(token: deviceToken(3), headers: alertHeaders())).response?.reason
                    == "BadDeviceToken"
            )

            #expect(try await Self.call(simulator, "DELETE", "/devices/\(deviceToken(3))").status == 200)
            #expect(try await probe.send(.push(token: deviceToken(3), headers: alertHeaders())).response?.status == 200)
            let device = try #require(
                try await Self.call(simulator, "GET", "/devices/\(deviceToken(3))").json as? [String: Any]
            )
            #expect(device["accepted"] as? Int == 1)
            #expect(device["state"] as? String == "active")
        }
    }

    @Test func faultsAreSetReadAndReset() async throws {
        try await withSimulatorAndProbe(Self.configuration()) { simulator, probe in
            let set = try await Self.call(
                simulator,
                "POST",
                "/faults",
                body: #"{"max_concurrent_streams": 3, "latency_ms": 1}"#
            )
            #expect(set.status == 200)
            #expect((set.json as? [String: Any])?["max_concurrent_streams"] as? Int == 3)
            try await probe.waitForMaxConcurrentStreams(3)
            #expect(simulator.faults.latencyMilliseconds == 1)

            let rates = try await Self.call(simulator, "POST", "/faults", body: #"{"rate_503": 1, "seed": 7}"#)
            #expect(rates.status == 200)
            #expect(
                try await probe.send(.push(token: deviceToken(), headers: alertHeaders())).response?.reason
                    == "ServiceUnavailable"
            )

            #expect(try await Self.call(simulator, "POST", "/reset").status == 200)
            #expect(simulator.faults == .none)
            try await probe.waitForMaxConcurrentStreams(1000)
            #expect(simulator.stats().rejected == 0)

            #expect(try await Self.call(simulator, "POST", "/faults", body: #"{"drop_now": true}"#).status == 200)
            try await probe.waitForClose()
        }
    }

    @Test func badControlRequestsGet400WithAJSONError() async throws {
        try await APNsSimulator.withRunning(Self.configuration()) { simulator in
            for body in [#"{"latency": 3}"#, #"{"rate_429": 2}"#, #"{"latency_ms": "x"}"#, "not json", "[1]"] {
                let result = try await Self.call(simulator, "POST", "/faults", body: body)
                #expect(result.status == 400, "\(body)")
                #expect((result.json as? [String: Any])?["error"] is String, "\(body)")
            }
            let badTimestamp = try await Self.call(
                simulator,
                "POST",
                "/devices/abcd/unregister",
                body: #"{"timestamp": "yesterday"}"#
            )
            #expect(badTimestamp.status == 400)
            #expect(try await Self.call(simulator, "GET", "/nope").status == 404)
            #expect(try await Self.call(simulator, "DELETE", "/stats").status == 405)
        }
    }
}
