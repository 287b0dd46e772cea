import APNsSimulator
import Foundation
import Testing

@Suite("Fault: every token bad (tokens of the other environment)")
struct EveryTokenBadFaultTests {
    @Test("every_token_bad answers 400 BadDeviceToken to every push that would be accepted, until set back to false")
    func everyTokenBad() async throws {
        try await withSimulatorAndProbe(ControlAPITests.configuration()) { simulator, probe in
            let set = try await ControlAPITests.call(simulator, "POST", "/faults", body: #"{"every_token_bad": true}"#)
            #expect(set.status == 200)
            #expect((set.json as? [String: Any])?["every_token_bad"] as? Bool == true)
            for index in 1...3 {
                let answer = try await probe.send(.push(token: deviceToken(index), headers: alertHeaders())).response
                #expect(answer?.status == 400)
                #expect(answer?.reason == "BadDeviceToken")
            }
            #expect(simulator.stats().accepted == 0)
            #expect(simulator.stats().rejectedByReason["BadDeviceToken"] == 3)
            let unset = try await ControlAPITests.call(
                simulator,
                "POST",
                "/faults",
                body: #"{"every_token_bad": false}"#
            )
            #expect(unset.status == 200)
            #expect(try await probe.send(.push(token: deviceToken(1), headers: alertHeaders())).response?.status == 200)
        }
    }
}
