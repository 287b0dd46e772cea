import APNsSimulator
import Foundation
import Testing

/// The simulator's high-water mark of open streams: exact, per connection and in total.
@Suite("Stream high-water marks")
struct StreamPeakTests {
    static func held(_ range: ClosedRange<Int>) -> [SimulatorProbe.Request] {
        range.map { SimulatorProbe.Request.push(token: deviceToken($0), headers: alertHeaders()) }
    }

    @Test("the peak counts every stream open at once, per connection and in total, and survives the answers")
    func peaksPerConnectionAndInTotal() async throws {
        try await withSimulatorAndProbe(ControlAPITests.configuration()) { simulator, probe in
            try simulator.updateFaults { $0.blackhole = true }
            _ = try await probe.start(Self.held(1...5))
            try await probe.ping()  // the server has read all five
            let second = try await SimulatorProbe.connect(
                port: simulator.port,
                trustRootsPEM: simulator.caCertificatePEM
            )
            _ = try await second.start(Self.held(6...8))
            try await second.ping()
            var stats = simulator.stats()
            #expect(stats.currentStreams == 8)
            #expect(stats.peakStreams == 8)
            #expect(stats.peakStreamsByConnection.values.sorted() == [3, 5])

            // One more stream on the first connection, answered: the peak keeps it, the count does not.
            try simulator.updateFaults { $0.blackhole = false }
            #expect(try await probe.send(.push(token: deviceToken(9), headers: alertHeaders())).response?.status == 200)
            stats = simulator.stats()
            #expect(stats.currentStreams == 8)
            #expect(stats.peakStreams == 9)
            #expect(stats.peakStreamsByConnection.values.sorted() == [3, 6])

            let json = try #require(try await ControlAPITests.call(simulator, "GET", "/stats").json as? [String: Any])
            #expect(json["current_streams"] as? Int == 8)
            #expect(json["peak_streams"] as? Int == 9)
            #expect((json["peak_streams_by_connection"] as? [String: Int])?.values.sorted() == [3, 6])

            simulator.resetPeakStreams()
            stats = simulator.stats()
            #expect(stats.peakStreams == 8)
            #expect(stats.peakStreamsByConnection.values.sorted() == [3, 5])
            await second.close()
        }
    }
}
