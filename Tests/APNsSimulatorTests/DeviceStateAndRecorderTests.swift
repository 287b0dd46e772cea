import APNsSimulator
import Foundation
import Testing

@Suite("Device states")
struct DeviceStateTests {
    @Test func anUnregisteredDeviceAnswers410WithTheTimeOfMarking() async throws {
        let clock = ManualSimulatorClock(start: Date(timeIntervalSince1970: 1_800_000_000.25))
        var configuration = APNsSimulator.Configuration()
        configuration.clock = clock
        try await withSimulatorAndProbe(configuration) { simulator, probe in
            simulator.markUnregistered(deviceToken(1))
            simulator.markUnregistered(deviceToken(2), at: Date(timeIntervalSince1970: 1_700_000_000.5))
            let first = try #require(
                try await probe.send(.push(token: deviceToken(1), headers: alertHeaders())).response
            )
            #expect(first.status == 410)
            #expect(first.reason == "Unregistered")
            #expect(first.timestamp == 1_800_000_000_250)
            #expect(
                String(decoding: first.body, as: UTF8.self) == #"{"reason":"Unregistered","timestamp":1800000000250}"#
            )
            let second = try #require(
                try await probe.send(.push(token: deviceToken(2), headers: alertHeaders())).response
            )
            #expect(second.timestamp == 1_700_000_000_500)
            // Token case does not matter.
            let upper = try #require(
                try await probe.send(.push(token: deviceToken(1).uppercased(), headers: alertHeaders())).response
            )
            #expect(upper.status == 410)
            simulator.clearDeviceState(deviceToken(1))
            #expect(try await probe.send(.push(token: deviceToken(1), headers: alertHeaders())).response?.status == 200)
        }
    }

    @Test func aBadDeviceAnswersBadDeviceTokenEvenInAcceptAllMode() async throws {
        var configuration = APNsSimulator.Configuration()
        configuration.handling = .acceptAll
        try await withSimulatorAndProbe(configuration) { simulator, probe in
            simulator.markBad(deviceToken(3))
            let response = try #require(try await probe.send(.push(token: deviceToken(3), headers: [])).response)
            #expect(response.status == 400)
            #expect(response.reason == "BadDeviceToken")
            #expect(try await probe.send(.push(token: deviceToken(4), headers: [])).response?.status == 200)
            #expect(simulator.stats().rejectedByReason == ["BadDeviceToken": 1])
        }
    }

    @Test func anInvalidRequestToAnUnregisteredDeviceReportsTheRequestError() async throws {
        try await withSimulatorAndProbe { simulator, probe in
            simulator.markUnregistered(deviceToken(5))
            let response = try #require(try await probe.send(.push(token: deviceToken(5), headers: [])).response)
            #expect(response.reason == "MissingTopic")
        }
    }
}

@Suite("Recorder")
struct RecorderTests {
    @Test func recordsKeepTokenHeadersPayloadTimeAndConnection() async throws {
        let clock = ManualSimulatorClock(start: Date(timeIntervalSince1970: 1_800_000_000))
        var configuration = APNsSimulator.Configuration()
        configuration.clock = clock
        try await withSimulatorAndProbe(configuration) { simulator, probe in
            let payload = #"{"aps":{"alert":"recorded"}}"#
            _ = try await probe.send(
                .push(
                    token: deviceToken(9),
                    headers: alertHeaders(extra: [("apns-collapse-id", "k")]),
                    payload: payload
                )
            )
            let record = try #require(simulator.notifications(device: deviceToken(9)).first)
            #expect(record.deviceToken == deviceToken(9))
            #expect(record.headers["apns-collapse-id"] == "k")
            #expect(record.headers[":path"] == "/3/device/\(deviceToken(9))")
            #expect(record.payloadString == payload)
            #expect(record.arrivalTime == clock.now())
            #expect(record.connectionID == 1)
            #expect(record.streamID == 1)
            #expect(simulator.notifications(device: deviceToken(10)).isEmpty)
        }
    }

    @Test func theRecordLimitKeepsTheFirstNAndCountsTheRest() async throws {
        var configuration = APNsSimulator.Configuration()
        configuration.recordLimit = 2
        try await withSimulatorAndProbe(configuration) { simulator, probe in
            let requests = (1...5).map { SimulatorProbe.Request.push(token: deviceToken($0), headers: alertHeaders()) }
            let outcomes = try await probe.send(requests)
            #expect(outcomes.allSatisfy { $0.response?.status == 200 })
            let stats = simulator.stats()
            #expect(stats.accepted == 5)
            #expect(stats.received == 5)
            #expect(stats.recorded == 2)
            #expect(simulator.notifications().count == 2)
            #expect(stats.devices == 5)
        }
    }

    @Test func duplicatesAreTheSameApnsIDOrPayloadToTheSameDevice() async throws {
        try await withSimulatorAndProbe { simulator, probe in
            let id = "123e4567-e89b-12d3-a456-426655440000"
            let withID = SimulatorProbe.Request.push(
                token: deviceToken(1),
                headers: alertHeaders(extra: [("apns-id", id)])
            )
            let other = SimulatorProbe.Request.push(
                token: deviceToken(1),
                headers: alertHeaders(),
                payload: #"{"n":2}"#
            )
            _ = try await probe.send([
                withID, withID, other, other,
                .push(token: deviceToken(2), headers: alertHeaders(), payload: #"{"n":2}"#),
            ])
            #expect(simulator.deliveries(device: deviceToken(1)) == DeviceDeliveries(accepted: 4, duplicates: 2))
            #expect(simulator.deliveries(device: deviceToken(2)) == DeviceDeliveries(accepted: 1, duplicates: 0))
            #expect(simulator.stats().duplicates == 2)
            #expect(simulator.stats().devices == 2)
        }
    }

    @Test func deviceTrackingCanBeTurnedOff() async throws {
        var configuration = APNsSimulator.Configuration()
        configuration.tracksDevices = false
        configuration.recordLimit = 0
        try await withSimulatorAndProbe(configuration) { simulator, probe in
            _ = try await probe.send(
                (1...3).map { _ in SimulatorProbe.Request.push(token: deviceToken(1), headers: alertHeaders()) }
            )
            let stats = simulator.stats()
            #expect(stats.accepted == 3)
            #expect(stats.devices == 0)
            #expect(stats.duplicates == 0)
            #expect(stats.recorded == 0)
        }
    }

    @Test func connectionAndStreamCountersFollowTheConnections() async throws {
        try await withSimulatorAndProbe { simulator, probe in
            _ = try await probe.send(.push(token: deviceToken(), headers: alertHeaders()))
            var stats = simulator.stats()
            #expect(stats.connectionsOpened == 1)
            #expect(stats.connectionsActive == 1)
            #expect(stats.currentStreams == 0)
            try simulator.reset()
            stats = simulator.stats()
            #expect(stats.accepted == 0)
            #expect(simulator.notifications().isEmpty)
            #expect(stats.connectionsActive == 1)
        }
    }
}
