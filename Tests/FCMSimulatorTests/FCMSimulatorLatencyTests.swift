import FCMSimulator
import Foundation
import Testing

@Suite("FCM simulator: latency fault")
struct FCMSimulatorLatencyTests {
    let message = #"{"message":{"token":"device-7","data":{"k":"v"}}}"#

    @Test("with a latency set, a send is answered no earlier than the latency after it was made")
    func heldAnswer() async throws {
        var configuration = FCMSimulator.Configuration()
        configuration.latencyMilliseconds = 300
        try await FCMFixture.with(configuration) { fixture in
            #expect(fixture.simulator.latencyMilliseconds == 300)
            let token = try await fixture.accessToken()
            let sent = ContinuousClock.now
            let answer = try await fixture.send(message, accessToken: token)
            let answered = ContinuousClock.now
            #expect(answer.status == 200)
            #expect(answered - sent >= .milliseconds(300))
            // The message was accepted (and recorded) before its answer was released.
            #expect(fixture.simulator.messages(token: "device-7").count == 1)
        }
    }

    @Test("latency_ms is set, read and reset over the control API; bad values and unknown keys are refused")
    func controlAPI() async throws {
        try await FCMFixture.with { fixture in
            #expect(try fixture.control("GET", "/faults") == #"{"latency_ms":0}"#)
            #expect(try fixture.control("POST", "/faults", #"{"latency_ms":250}"#) == #"{"latency_ms":250}"#)
            #expect(fixture.simulator.latencyMilliseconds == 250)
            let token = try await fixture.accessToken()
            let sent = ContinuousClock.now
            #expect(try await fixture.send(message, accessToken: token).status == 200)
            #expect(ContinuousClock.now - sent >= .milliseconds(250))

            #expect(
                try fixture.control("POST", "/faults", #"{"latency_ms":-1}"#).contains("latency_ms must be an integer")
            )
            #expect(
                try fixture.control("POST", "/faults", #"{"latency_ms":true}"#).contains(
                    "latency_ms must be an integer"
                )
            )
            #expect(try fixture.control("POST", "/faults", #"{"rate_503":0.5}"#).contains("unknown key rate_503"))
            #expect(fixture.simulator.latencyMilliseconds == 250)
            #expect(try fixture.control("POST", "/faults", #"{"latency_ms":null}"#) == #"{"latency_ms":0}"#)
            #expect(try fixture.control("GET", "/faults") == #"{"latency_ms":0}"#)
        }
    }

    @Test("stats count distinct devices and duplicates among accepted messages")
    func deviceCounts() async throws {
        try await FCMFixture.with { fixture in
            let token = try await fixture.accessToken()
            for device in ["a-1", "a-2", "a-1"] {
                let body = #"{"message":{"token":"\#(device)","data":{"k":"v"}}}"#
                #expect(try await fixture.send(body, accessToken: token).status == 200)
            }
            let stats = fixture.simulator.stats()
            #expect(stats.accepted == 3)
            #expect(stats.devices == 2)
            #expect(stats.duplicates == 1)
            fixture.simulator.reset()
            #expect(fixture.simulator.stats().devices == 0)
        }
    }
}
