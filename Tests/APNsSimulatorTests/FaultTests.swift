import APNsSimulator
import Foundation
import Testing

@Suite("Faults")
struct FaultTests {
    static func requests(_ count: Int) -> [SimulatorProbe.Request] {
        (1...count).map { SimulatorProbe.Request.push(token: deviceToken($0), headers: alertHeaders()) }
    }

    @Test func goAwayAfterNStreamsAnswersUpToTheLastStreamIDAndNothingAbove() async throws {
        var configuration = APNsSimulator.Configuration()
        configuration.faults.goAwayAfterStreams = 3
        try await withSimulatorAndProbe(configuration) { simulator, probe in
            let outcomes = try await probe.send(Self.requests(6))
            #expect(outcomes.map { $0.response?.status } == [200, 200, 200, nil, nil, nil])
            #expect(
                outcomes.suffix(3).map { $0 } == [
                    .unanswered(streamID: 7), .unanswered(streamID: 9), .unanswered(streamID: 11),
                ]
            )
            #expect(try await probe.goAwayLastStreamID() == 5)
            try await probe.waitForClose()
            let stats = simulator.stats()
            #expect(stats.goAwaysSent == 1)
            #expect(stats.accepted == 3)
            #expect(stats.received == 3)  // streams above the last stream ID were never processed
        }
    }

    /// Requests without a body, so that they reach the server in stream order (NIOHTTP2 may
    /// reorder DATA frames of different streams).
    static func bodylessRequests(_ count: Int) -> [SimulatorProbe.Request] {
        (1...count).map { SimulatorProbe.Request(path: "/3/device/\(deviceToken($0))") }
    }

    @Test func dropAfterNStreamsClosesTheConnectionWithoutGoAway() async throws {
        var configuration = APNsSimulator.Configuration()
        configuration.faults.dropAfterStreams = 2
        configuration.handling = .acceptAll
        try await withSimulatorAndProbe(configuration) { simulator, probe in
            let outcomes = try await probe.send(Self.bodylessRequests(4))
            #expect(outcomes.prefix(2).allSatisfy { $0.response?.status == 200 }, "\(outcomes)")
            #expect(outcomes.suffix(2).allSatisfy { $0.response == nil })
            try await probe.waitForClose()
            #expect(try await probe.goAwayLastStreamID() == nil)
        }
    }

    @Test func dropAfterZeroRefusesNewConnections() async throws {
        var configuration = APNsSimulator.Configuration()
        configuration.faults.dropAfterStreams = 0
        try await APNsSimulator.withRunning(configuration) { simulator in
            await #expect(throws: (any Error).self) {
                _ = try await SimulatorProbe.connect(port: simulator.port, trustRootsPEM: simulator.caCertificatePEM)
            }
        }
    }

    @Test func dropNowClosesEveryLiveConnection() async throws {
        try await withSimulatorAndProbe { simulator, probe in
            _ = try await probe.send(.push(token: deviceToken(), headers: alertHeaders()))
            simulator.dropAllConnections()
            try await probe.waitForClose()
        }
    }

    @Test func aNewMaxConcurrentStreamsReachesLiveAndNewConnections() async throws {
        var configuration = APNsSimulator.Configuration()
        configuration.maxConcurrentStreams = 250
        try await withSimulatorAndProbe(configuration) { simulator, probe in
            #expect(try await probe.remoteMaxConcurrentStreams() == 250)
            try simulator.updateFaults { $0.maxConcurrentStreams = 7 }
            try await probe.waitForMaxConcurrentStreams(7)
            let fresh = try await SimulatorProbe.connect(
                port: simulator.port,
                trustRootsPEM: simulator.caCertificatePEM
            )
            #expect(try await fresh.remoteMaxConcurrentStreams() == 7)
            await fresh.close()
            try simulator.reset()
            try await probe.waitForMaxConcurrentStreams(250)
        }
    }

    @Test(arguments: [
        (SimulatorFaults(rate429: 1), "429 TooManyRequests"),
        (SimulatorFaults(rate500: 1), "500 InternalServerError"),
        (SimulatorFaults(rate503: 1), "503 ServiceUnavailable"),
    ])
    func errorRatesOfOneAnswerEveryRequestWithThatError(faults: SimulatorFaults, expected: String) async throws {
        try await withSimulatorAndProbe { simulator, probe in
            try simulator.setFaults(faults)
            let outcomes = try await probe.send(Self.requests(3))
            #expect(
                outcomes.map { "\($0.response?.status ?? 0) \($0.response?.reason ?? "-")" }
                    == Array(repeating: expected, count: 3)
            )
            #expect(simulator.stats().accepted == 0)
        }
    }

    @Test func seededErrorRatesAreReproducible() async throws {
        func run() async throws -> [Int] {
            try await withSimulatorAndProbe { simulator, probe in
                try simulator.setFaults(SimulatorFaults(rate429: 0.3, rate503: 0.3), seed: 42)
                // One at a time: the draws follow the order in which requests complete.
                var statuses: [Int] = []
                for request in Self.requests(40) {
                    statuses.append(try await probe.send(request).response?.status ?? 0)
                }
                return statuses
            }
        }
        let first = try await run()
        let second = try await run()
        #expect(second == first, "\(first) vs \(second)")
        #expect(Set(first) == [200, 429, 503])
    }

    @Test func latencyDelaysEveryAnswer() async throws {
        try await withSimulatorAndProbe { simulator, probe in
            try simulator.updateFaults { $0.latencyMilliseconds = 150 }
            let start = ContinuousClock.now
            let outcomes = try await probe.send(Self.requests(3))
            #expect(ContinuousClock.now - start >= .milliseconds(150))
            #expect(outcomes.allSatisfy { $0.response?.status == 200 })
        }
    }

    @Test func heldAnswersGoOutOnlyOnceTheHoldIsCleared() async throws {
        try await withSimulatorAndProbe { simulator, probe in
            try simulator.updateFaults { $0.holdAnswers = true }
            let pending = try await probe.start(
                (1...3).map { .push(token: deviceToken($0), headers: alertHeaders()) }
            )
            try await probe.ping()  // the server has read the requests
            #expect(simulator.stats().currentStreams == 3)
            for request in pending { #expect(await request.isComplete == false) }
            try simulator.updateFaults { $0.holdAnswers = false }
            for request in pending { #expect(try await request.outcome().response?.status == 200) }
            let stats = simulator.stats()
            #expect(stats.accepted == 3)
            #expect(stats.currentStreams == 0)
        }
    }

    @Test func aBlackholeNeverAnswers() async throws {
        try await withSimulatorAndProbe { simulator, probe in
            try simulator.updateFaults { $0.blackhole = true }
            let pending = try await probe.start([.push(token: deviceToken(1), headers: alertHeaders())])
            try await probe.ping()  // the server has read the request
            var stats = simulator.stats()
            #expect(stats.blackholed == 1)
            #expect(stats.currentStreams == 1)
            try simulator.updateFaults { $0.blackhole = false }
            #expect(try await probe.send(.push(token: deviceToken(2), headers: alertHeaders())).response?.status == 200)
            #expect(await pending[0].isComplete == false)
            stats = simulator.stats()
            #expect(stats.accepted == 1)
            await probe.close()
            #expect(try await pending[0].outcome() == .unanswered(streamID: 1))
        }
    }
}
