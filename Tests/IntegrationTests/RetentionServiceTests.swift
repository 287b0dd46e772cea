import Crypto
import Foundation
import Logging
import Prometheus
import PushgateConfig
import PushgateCore
import PushgateSQLite
import Testing

@testable import PushgateGateway

@Suite("Retention in the gateway: store.retention, the pass and its metrics")
struct RetentionServiceTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    static let week: TimeInterval = 7 * 24 * 3600

    @Test("a pass deletes what finished more than the retention period ago and counts it in the metrics")
    func passDeletesAndCounts() async throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteStore(path: directory.path("retention.db"))
        defer { try? store.close() }
        let token = try DeviceToken(hex: String(repeating: "ab", count: 32))
        for (name, finishedAfter) in [("old", 0.0), ("recent", 2.0)] {
            let request = NotificationRequest(
                id: try RequestID(name),
                app: Registration.defaultApp,
                groups: [],
                devices: [token],
                pushType: .alert,
                priority: .immediate,
                expiration: .storagePolicy,
                payload: Payload.alert("hello"),
                createdAt: Self.start
            )
            let lease = LeaseWindow(
                owner: InstanceID("test"),
                now: Self.start.addingTimeInterval(finishedAfter),
                duration: .seconds(30)
            )
            let (_, claimed) = try await store.enqueue(request, claiming: lease, chunkSize: 10, pageLimit: 10)
            let work = try #require(claimed)
            var progress = ChunkProgress(
                chunk: work.chunk,
                through: work.firstPage.scannedThrough,
                completesChunk: true
            )
            progress.failures = [FailureEntry(token: token, reason: "BadDeviceToken", status: 400, at: lease.now)]
            _ = try await store.recordProgress(progress, renewing: lease)
        }
        let registry = PrometheusCollectorRegistry()
        let clock = ManualWallClock(Self.start.addingTimeInterval(Self.week + 1))
        let service = RetentionService(
            pruner: LedgerPruner(store: store, configuration: .init(retention: .seconds(Int64(Self.week)))),
            interval: .seconds(60),
            clock: clock,
            metricsFactory: PrometheusMetricsFactory(registry: registry),
            logger: Logger(label: "test.retention")
        )
        let pass = try #require(await service.runPass())
        #expect(pass.summary.requests == 1)
        #expect(try await store.report(try RequestID("old")) == nil)
        #expect(try await store.report(try RequestID("recent")) != nil, "finished 1 s before the cutoff's end")
        let metrics = try PrometheusText(parsing: registry.emitToString())
        #expect(metrics.value("pushgate_store_pruned_requests_total") == 1)
        #expect((metrics.value("pushgate_store_pruned_rows_total") ?? 0) >= 4, "request, chunk, token, failure...")
        #expect(metrics.value("pushgate_store_retention_transaction_seconds") != nil)

        clock.advance(by: 2)
        #expect(await service.runPass()?.summary.requests == 1, "the clock is the injected one")
        #expect(try await store.report(try RequestID("recent")) == nil)
    }

    @Test("store.retention reaches the gateway: a week by default, nil when off")
    func composition() throws {
        let directory = try TemporaryDirectory()
        func built(_ seconds: Int?) throws -> Gateway.Configuration {
            var configuration = GatewayConfiguration()
            configuration.store.path = directory.path("gateway.db")
            if let seconds { configuration.store.retentionSeconds = seconds }
            configuration.apps = [
                GatewayConfiguration.App(
                    name: Registration.defaultApp,
                    authentication: .token(
                        keyFile: try Self.keyFile(in: directory),
                        keyID: "KEY1234567",
                        teamID: "TEAM123456"
                    )
                )
            ]
            configuration.apps[0].topic = "com.example.pushgate"
            return try Gateway.Configuration(configuration, environment: [:])
        }
        #expect(try built(nil).retention?.retention == .seconds(7 * 24 * 3600))
        #expect(try built(30 * 24 * 3600).retention?.retention == .seconds(30 * 24 * 3600))
        #expect(try built(0).retention == nil)
    }

    static func keyFile(in directory: TemporaryDirectory) throws -> String {
        let path = directory.path("AuthKey.p8")
        if !FileManager.default.fileExists(atPath: path) {
            try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: path))
        }
        return path
    }
}
