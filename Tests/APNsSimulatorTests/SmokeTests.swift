import APNsSimulator
import Foundation
import Testing

@Suite struct SmokeTests {
    @Test func aValidPushIsAcceptedAndRecorded() async throws {
        try await withSimulatorAndProbe { simulator, probe in
            let outcome = try await probe.send(.push(token: deviceToken(), headers: alertHeaders()))
            let response = try #require(outcome.response)
            #expect(response.status == 200)
            #expect(response.headers["apns-id"]?.count == 36)
            #expect(response.headers["apns-unique-id"]?.count == 36)
            let records = simulator.notifications()
            #expect(records.count == 1)
            #expect(records.first?.deviceToken == deviceToken())
            #expect(records.first?.topic == bundleID)
        }
    }
}
