import CoreMetrics
import Logging
import PushgateSQLite
import ServiceLifecycle

/// The SQLite store's rounds while the gateway runs: about once a second it lets the store checkpoint an
/// idle writer's WAL (``SQLiteStore/maintain()``), records the files' sizes and the volume's free space
/// as metrics, and warns when the free space falls below `store.minimumFreeBytes` (once, and once more
/// when it is back). Started first and stopped last, around everything that writes.
final class StoreMaintenance: Service {
    private let store: SQLiteStore
    private let interval: Duration
    private let logger: Logger
    private let mainBytes: Gauge
    private let walBytes: Gauge
    private let freeBytes: Gauge

    init(store: SQLiteStore, metricsFactory: any MetricsFactory, interval: Duration = .seconds(1), logger: Logger) {
        self.store = store
        self.interval = interval
        self.logger = logger
        mainBytes = Gauge(label: "pushgate_store_bytes", dimensions: [("file", "main")], factory: metricsFactory)
        walBytes = Gauge(label: "pushgate_store_bytes", dimensions: [("file", "wal")], factory: metricsFactory)
        freeBytes = Gauge(label: "pushgate_store_free_bytes", factory: metricsFactory)
    }

    func run() async throws {
        var alarm = DiskSpaceAlarm()
        while !Task.isCancelled, !Task.isShuttingDownGracefully {
            let use = await store.maintain()
            mainBytes.record(use.databaseBytes)
            walBytes.record(use.walBytes)
            freeBytes.record(use.freeBytes)
            switch alarm.measured(isLow: use.isLow) {
            case .warn:
                logger.warning(
                    "the database's volume is running out of space: free space below store.minimumFreeBytes",
                    metadata: [
                        "store.free_bytes": "\(use.freeBytes)", "store.minimum_free_bytes": "\(use.minimumFreeBytes)",
                        "store.database_bytes": "\(use.databaseBytes)", "store.wal_bytes": "\(use.walBytes)",
                    ]
                )
            case .clear:
                logger.info(
                    "the database's volume has room again",
                    metadata: ["store.free_bytes": "\(use.freeBytes)"]
                )
            case .none:
                break
            }
            do {
                try await cancelWhenGracefulShutdown { [interval] in try await Task.sleep(for: interval) }
            } catch {
                break
            }
        }
    }
}

/// Whether a measurement starts or ends a low-disk episode: one warning when the free space falls below
/// the minimum, one line when it is back, nothing in between. Pure.
struct DiskSpaceAlarm: Sendable, Equatable {
    enum Action: Sendable, Equatable {
        case none, warn, clear
    }

    private(set) var isLow = false

    mutating func measured(isLow low: Bool) -> Action {
        defer { isLow = low }
        switch (isLow, low) {
        case (false, true): return .warn
        case (true, false): return .clear
        default: return .none
        }
    }
}
