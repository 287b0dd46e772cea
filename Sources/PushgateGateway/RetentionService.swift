import CoreMetrics
import Logging
import PushgateCore
import ServiceLifecycle

/// Retention while the gateway runs (`store.retention`): a ``LedgerPruner`` pass at start and then every
/// `interval`, on the injected clock's time, deleting requests that finished more than the retention
/// period ago in small batches (each its own short transaction). A pass that fails is logged and the next
/// one goes on from there; a graceful shutdown ends a pass between two batches.
final class RetentionService: Service {
    private let pruner: LedgerPruner
    private let interval: Duration
    private let clock: any WallClock
    private let logger: Logger
    private let prunedRequests: Counter
    private let prunedRows: Counter
    private let longestTransaction: Gauge

    init(
        pruner: LedgerPruner,
        interval: Duration,
        clock: any WallClock,
        metricsFactory: any MetricsFactory,
        logger: Logger
    ) {
        self.pruner = pruner
        self.interval = interval
        self.clock = clock
        self.logger = logger
        prunedRequests = Counter(label: "pushgate_store_pruned_requests_total", factory: metricsFactory)
        prunedRows = Counter(label: "pushgate_store_pruned_rows_total", factory: metricsFactory)
        longestTransaction = Gauge(
            label: "pushgate_store_retention_transaction_seconds",
            factory: metricsFactory
        )
    }

    func run() async throws {
        while !Task.isCancelled, !Task.isShuttingDownGracefully {
            await runPass()
            do {
                try await cancelWhenGracefulShutdown { [interval] in try await Task.sleep(for: interval) }
            } catch {
                break
            }
        }
    }

    /// One pass; nil when it failed (logged).
    @discardableResult
    func runPass() async -> LedgerPruner.Pass? {
        do {
            let pass = try await pruner.prune(now: clock.now()) { !Task.isShuttingDownGracefully }
            prunedRequests.increment(by: pass.summary.requests)
            prunedRows.increment(by: pass.summary.rows)
            if pass.summary.transactions > 0 {
                longestTransaction.record(
                    Double(pass.longestTransaction.components.attoseconds) / 1e18
                        + Double(pass.longestTransaction.components.seconds)
                )
            }
            if pass.summary.requests > 0 {
                logger.debug(
                    "retention pass",
                    metadata: [
                        "store.pruned_requests": "\(pass.summary.requests)",
                        "store.pruned_rows": "\(pass.summary.rows)",
                        "store.transactions": "\(pass.summary.transactions)",
                        "store.longest_transaction": "\(pass.longestTransaction)",
                    ]
                )
            }
            return pass
        } catch {
            logger.warning(
                "retention pass failed; the next one goes on from what was deleted",
                metadata: ["store.error": "\(error)"]
            )
            return nil
        }
    }
}
