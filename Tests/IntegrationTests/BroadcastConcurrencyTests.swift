import APNsHTTP2
import APNsSimulator
import Foundation
import PushgateCore
import Testing

/// Concurrency follows the network: with answers held as a distant APNs holds them, a broadcast
/// keeps as many streams open as the pool and the server allow, not a fixed number.
///
/// The simulator holds every answer until the test has seen more than 3,000 streams open at once, then
/// lets them all go: an event, not a time, so a machine that reads a few hundred streams a second (a debug
/// build while CI runs every suite at once) needs longer, not luck (issue #27: a fixed 14 s hold and a
/// 120 s limit). The time limit is a safety net, not a budget.
@Suite("Broadcast concurrency against a held-answer APNs", .timeLimit(.minutes(6)))
struct BroadcastConcurrencyTests {
    @Test("a broadcast through the dispatcher and the client keeps more than 2,000 streams open at once")
    func broadcastKeepsMoreThanTwoThousandStreamsOpen() async throws {
        let devices = 5_000
        try await SimulatorFixture.with(
            .token,
            simulator: {
                $0.maxConcurrentStreams = 1_000
                $0.faults.holdAnswers = true
                $0.recordLimit = 0
            },
            client: {
                $0.maximumConnections = 4
                // Far beyond any wait here, so that neither a request queued behind the first 4,000 nor
                // an answer read late by a starved test process gives up: each device is answered once.
                $0.requestTimeout = .seconds(300)
            }
        ) { simulator, client, _ in
            try await DispatcherPipelineTests.withBroadcast(
                to: client,
                devices: devices,
                chunkSize: 20_000,
                pageSize: 4_000,
                maximumInFlight: nil
            ) { store, id in
                // Three full connections and some: more than one connection's worth can only be open
                // at once if the pool opened more (each holds at most the server's 1,000).
                try await eventually("more than 3,000 streams open at once", timeout: .seconds(300)) {
                    simulator.stats().currentStreams > 3_000
                }
                try simulator.updateFaults { $0.holdAnswers = false }
                try await eventually("the broadcast is done", timeout: .seconds(300)) {
                    try await store.report(id)?.state == .done
                }
                #expect(try await store.report(id)?.accepted == devices)
            }
            let stats = simulator.stats()
            // Every device was reached, and the report above counts each once.
            #expect(stats.accepted >= devices)
            // The simulator's exact high-water mark, not a sample.
            #expect(stats.peakStreams > 2_000, "at most \(stats.peakStreams) streams were open at once")
            // No connection went over the server's limit, so the pool spread the load over three or more.
            #expect(stats.peakStreamsByConnection.values.allSatisfy { $0 <= 1_000 }, "\(stats.peakStreamsByConnection)")
            #expect(stats.peakStreamsByConnection.count >= 3, "\(stats.peakStreamsByConnection)")
        }
    }
}
