import Foundation
import Prometheus
import PushgateCore
import PushgateDispatch
import Testing

@Suite(
    "Dispatcher: targets invalidated or removed before fan-out reads them are counted as skipped",
    .timeLimit(.minutes(2))
)
struct DispatcherSkipTests {
    @Test("skipped targets are recorded once each, across pages and progress records: targets = accepted + skipped")
    func skippedTargetsAreCounted() async throws {
        // Few in flight and small pages: the end of the group is read long after the changes below, in
        // many pages and records.
        let registry = PrometheusCollectorRegistry()
        try await DispatcherPipelineTests.withBroadcast(
            devices: 300,
            chunkSize: 100,
            pageSize: 10,
            maximumInFlight: 10,
            metrics: DispatchMetrics(factory: PrometheusMetricsFactory(registry: registry))
        ) { transport, store, id in
            try await eventually("the first sends", timeout: .seconds(60)) { transport.submitted > 0 }
            let later = Date()
            for number in 200..<210 {
                _ = try await store.invalidate(
                    app: Registration.defaultApp,
                    token: DispatcherPipelineTests.token(number),
                    reason: .unregistered,
                    appleTimestamp: nil,
                    at: later
                )
            }
            for number in stride(from: 250, to: 300, by: 10) {
                _ = try await store.unassign(
                    app: Registration.defaultApp,
                    token: DispatcherPipelineTests.token(number),
                    group: "all"
                )
            }
            try await eventually("request done", timeout: .seconds(60)) {
                transport.answerAll()
                return try await store.report(id)?.state == .done
            }
            let report = try #require(try await store.report(id))
            #expect(report.targets == 300)
            #expect(report.skipped == 15)
            #expect(report.accepted == 285)
            #expect(report.failed == 0)
            #expect(transport.submitted == 285)
            // Counted once the dispatcher has picked up its last record's result.
            try await eventually("the skipped counter", timeout: .seconds(60)) {
                let metrics = try PrometheusText(parsing: registry.emitToString())
                return metrics.value(#"pushgate_notifications_skipped_total{app="default"}"#) == 15
            }
        }
    }
}
