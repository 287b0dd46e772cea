public import Foundation

/// Runs ``LedgerRetention`` passes against a store: the one implementation of retention, whatever the
/// store.
public struct LedgerPruner: Sendable {
    /// A pass's figures, with the longest of its write transactions as the driver timed it.
    public struct Pass: Sendable, Hashable {
        public var summary: LedgerRetention.Summary
        public var longestTransaction: Duration
        /// All write transactions together (their mean: this over `summary.transactions`).
        public var transactionTime: Duration
    }

    public let store: any LedgerPruning
    public let configuration: LedgerRetention.Configuration

    public init(store: any LedgerPruning, configuration: LedgerRetention.Configuration) {
        self.store = store
        self.configuration = configuration
    }

    /// Deletes every request that finished more than the retention period before `now`, batch by batch.
    /// Between batches other writers get their turn (each batch is its own transaction). A store error
    /// ends the pass (what was committed stays deleted; the next pass goes on from there), and so does
    /// `shouldContinue` answering false before a batch (a graceful shutdown).
    public func prune(now: Date, while shouldContinue: @Sendable () -> Bool = { true }) async throws -> Pass {
        var machine = LedgerRetention(configuration: configuration, now: now)
        var longest = Duration.zero
        var total = Duration.zero
        let clock = ContinuousClock()
        var action = machine.start()
        while true {
            switch action {
            case .scan(let after, let limit):
                action = machine.scanned(try await store.retentionScan(after: after, limit: limit))
            case .deleteDetails(let batch, let limit):
                guard shouldContinue() else {
                    return Pass(summary: machine.summarySoFar, longestTransaction: longest, transactionTime: total)
                }
                var count = 0
                let took = try await clock.measure {
                    count = try await store.deleteRetainedDetails(of: batch, limit: limit)
                }
                longest = max(longest, took)
                total += took
                action = machine.detailsDeleted(count)
            case .deleteRequests(let batch):
                var pruned = PrunedRows(requests: 0, rows: 0)
                let took = try await clock.measure { pruned = try await store.deleteRetainedRequests(batch) }
                longest = max(longest, took)
                total += took
                action = machine.requestsDeleted(pruned)
                await Task.yield()
            case .finished(let summary):
                return Pass(summary: summary, longestTransaction: longest, transactionTime: total)
            }
        }
    }
}
