import APNsHTTP2
import APNsSimulator
import Foundation
import PushgateCore
import Testing

/// Concurrency follows the network: with answers held as a distant APNs holds them, a broadcast
/// keeps as many streams open as the pool and the server allow, not a fixed number.
/// The time limit is a safety net, not a budget: in CI's full parallel run on two cores this broadcast
/// took more than 2 minutes (issue #27).
@Suite("Broadcast concurrency against a held-answer APNs", .timeLimit(.minutes(6)))
struct BroadcastConcurrencyTests {
    @Test("a broadcast through the dispatcher and the client keeps more than 2,000 streams open at once")
    func broadcastKeepsMoreThanTwoThousandStreamsOpen() async throws {
        let devices = 5_000
        try await SimulatorFixture.with(
            .token,
            simulator: {
                $0.maxConcurrentStreams = 1_000
                // Every answer is held 14 s. A stream counts from when the simulator reads it, and a debug build
                // on a busy machine (CI runs every suite at once) reads only a few hundred a second and takes
                // seconds to open a TLS connection: the hold must outlast opening a third connection and reading
                // 4,000 (with 8 s, a loaded run peaked at exactly two full connections).
                $0.faults.latencyMilliseconds = 14_000
                $0.recordLimit = 0
            },
            client: {
                $0.maximumConnections = 4
                // Far beyond the hold, so that neither a request queued behind the first 4,000 nor an
                // answer read late by a starved test process gives up (issue #27): each device is
                // answered once, whatever the load.
                $0.requestTimeout = .seconds(240)
            }
        ) { simulator, client, _ in
            try await DispatcherPipelineTests.withBroadcast(
                to: client,
                devices: devices,
                chunkSize: 20_000,
                pageSize: 4_000,
                maximumInFlight: nil
            ) { store, id in
                try await eventually("the broadcast is done", timeout: .seconds(330)) {
                    try await store.report(id)?.state == .done
                }
                #expect(try await store.report(id)?.accepted == devices)
            }
            let stats = simulator.stats()
            // Resends are allowed (a slow machine can outlast a retry batch's lease); every device was
            // reached, and the report above counts each once.
            #expect(stats.accepted >= devices)
            // The simulator's exact high-water mark, not a sample.
            #expect(stats.peakStreams > 2_000, "at most \(stats.peakStreams) streams were open at once")
            // No connection went over the server's limit, so the pool spread the load over three or more.
            #expect(stats.peakStreamsByConnection.values.allSatisfy { $0 <= 1_000 }, "\(stats.peakStreamsByConnection)")
            #expect(stats.peakStreamsByConnection.count >= 3, "\(stats.peakStreamsByConnection)")
        }
    }
}
