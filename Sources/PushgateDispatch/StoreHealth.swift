import CoreMetrics
public import Foundation
import Logging
import PushgateCore
import Synchronization

/// The dispatcher's store operations, as named in logs and in `pushgate_store_failures_total`.
public enum StoreOperation: String, Sendable, CaseIterable {
    case releaseLeases = "release_leases"
    case claimChunk = "claim_chunk"
    case readRequest = "read_request"
    case readTargets = "read_targets"
    case recordProgress = "record_progress"
    case claimRetries = "claim_retries"
    case recordRetryOutcomes = "record_retry_outcomes"
    case expireOverdue = "expire_overdue"
    case nextWakeUp = "next_wake_up"
}

/// When to try the store again after consecutive failures: doubling from `initial` up to `limit`.
/// Pure: the caller supplies the time.
public struct StoreBackoff: Sendable, Equatable {
    public var initial: Duration
    public var limit: Duration
    /// Failures since the store last answered.
    public private(set) var failures = 0
    /// No store operation starts before this (nil: the store is healthy).
    public private(set) var retryAt: Date?

    public init(initial: Duration = .milliseconds(100), limit: Duration = .seconds(5)) {
        self.initial = initial
        self.limit = limit
    }

    public var isHealthy: Bool { failures == 0 }

    public func mayTry(at now: Date) -> Bool { retryAt.map { now >= $0 } ?? true }

    public mutating func failed(at now: Date) {
        failures += 1
        var delay = initial
        for _ in 1..<min(failures, 32) where delay < limit { delay *= 2 }
        retryAt = now.addingTimeInterval(min(delay, limit).seconds)
    }

    public mutating func succeeded() {
        failures = 0
        retryAt = nil
    }
}

extension Duration {
    var seconds: TimeInterval { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// The dispatcher's view of its store: failures are counted, logged once per outage, shown in the
/// metrics and readiness, and delay the next store operation; a success ends the outage.
final class StoreHealth: Sendable {
    private let state: Mutex<StoreBackoff>
    private let healthy = Atomic<Bool>(true)
    private let clock: any WallClock
    private let logger: Logger
    private let failureCounters: [StoreOperation: Counter]
    private let healthyGauge: Gauge

    init(backoff: StoreBackoff, clock: any WallClock, logger: Logger, factory: any MetricsFactory) {
        self.state = Mutex(backoff)
        self.clock = clock
        self.logger = logger
        var counters: [StoreOperation: Counter] = [:]
        for operation in StoreOperation.allCases {
            counters[operation] = Counter(
                label: "pushgate_store_failures_total",
                dimensions: [("operation", operation.rawValue)],
                factory: factory
            )
        }
        self.failureCounters = counters
        self.healthyGauge = Gauge(label: "pushgate_store_healthy", factory: factory)
        healthyGauge.record(1)
    }

    /// False from a failed store operation until one succeeds.
    var isHealthy: Bool { healthy.load(ordering: .relaxed) }

    /// Whether a store operation may start now (false during a back-off).
    func mayTry() -> Bool {
        if isHealthy { return true }
        let now = clock.now()
        return state.withLock { $0.mayTry(at: now) }
    }

    /// When the back-off ends (nil when healthy).
    var retryAt: Date? { isHealthy ? nil : state.withLock { $0.retryAt } }

    func failed(_ operation: StoreOperation, _ error: any Error) {
        let now = clock.now()
        let failures = state.withLock { backoff in
            backoff.failed(at: now)
            return backoff.failures
        }
        healthy.store(false, ordering: .relaxed)
        healthyGauge.record(0)
        failureCounters[operation]?.increment()
        // One line when an outage starts, then one per 100 failures: a dead store must not flood the log.
        if failures == 1 || failures % 100 == 0 {
            logger.error(
                "store operation failed; retrying after a back-off",
                metadata: [
                    "push.store_operation": "\(operation.rawValue)", "push.store_failures": "\(failures)",
                    "error": "\(error)",
                ]
            )
        }
    }

    func succeeded() {
        guard !isHealthy else { return }
        let failures = state.withLock { backoff in
            defer { backoff.succeeded() }
            return backoff.failures
        }
        healthy.store(true, ordering: .relaxed)
        healthyGauge.record(1)
        logger.info("store answers again", metadata: ["push.store_failures": "\(failures)"])
    }

    /// Runs one store operation: nil (counted, logged, backed off) when it throws.
    func attempt<T>(_ operation: StoreOperation, _ body: () async throws -> T) async -> T? {
        do {
            let value = try await body()
            succeeded()
            return value
        } catch {
            failed(operation, error)
            return nil
        }
    }
}
