public import Foundation

/// One retention pass as a state machine: it decides which finished requests are past the retention
/// period and in which batches they are deleted. Pure: the driver (``LedgerPruner``) carries out each
/// ``Action`` against a ``LedgerPruning`` store and reports the answer with the next event.
///
/// The pass walks the requests in sequence order from the first. A request created at or after the cutoff
/// cannot have finished before it, so the walk stops at the first one: what it reads is what it deletes,
/// plus the few older requests that are unfinished or finished recently (kept, and read again by the next
/// pass). No index is needed for it, and nothing is written per request for it on the hot path.
///
/// Each batch is at most ``Configuration/requestsPerBatch`` requests. Their per-device rows go first, at
/// most ``Configuration/rowsPerBatch`` a transaction, so that a broadcast with a million failures does not
/// hold the writer for long; then the requests with the rest of their rows in one transaction.
public struct LedgerRetention: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// How long a finished request is kept (`store.retention`).
        public var retention: Duration
        /// Requests read per scan (a read, outside any write transaction).
        public var scanLimit: Int = 500
        /// Requests deleted per transaction: 25 one-device requests are about 100 rows, a few milliseconds
        /// of the writer in a debug build (pushgate-bench retention).
        public var requestsPerBatch: Int = 25
        /// Per-device rows (failures, direct tokens) deleted per transaction.
        public var rowsPerBatch: Int = 250

        public init(retention: Duration) {
            self.retention = retention
        }

        /// The default `store.retention`: a week.
        public static let defaultRetention: Duration = .seconds(7 * 24 * 60 * 60)
    }

    /// What a pass did.
    public struct Summary: Hashable, Sendable {
        public var requests = 0
        /// Every row deleted, request rows included.
        public var rows = 0
        /// Write transactions run.
        public var transactions = 0
        /// Requests read by the scans.
        public var scanned = 0

        public init() {}
    }

    public enum Action: Hashable, Sendable {
        /// Read requests after this sequence number (``LedgerPruning/retentionScan(after:limit:)``).
        case scan(after: Int64, limit: Int)
        /// Delete per-device rows of this batch (``LedgerPruning/deleteRetainedDetails(of:limit:)``).
        case deleteDetails([Int64], limit: Int)
        /// Delete the batch's requests (``LedgerPruning/deleteRetainedRequests(_:)``).
        case deleteRequests([Int64])
        /// The pass is over.
        case finished(Summary)
    }

    private enum State: Sendable {
        case idle
        case scanning
        case deletingDetails([Int64])
        case deletingRequests([Int64])
        case finished
    }

    public let configuration: Configuration
    /// Requests that finished before this are deleted.
    public let cutoff: Date
    private var state = State.idle
    private var cursor: Int64 = 0
    private var scanIsOver = false
    private var due: [Int64] = []
    private var summary = Summary()

    public init(configuration: Configuration, now: Date) {
        self.configuration = configuration
        let seconds = configuration.retention.components
        cutoff = now.addingTimeInterval(
            -(TimeInterval(seconds.seconds) + TimeInterval(seconds.attoseconds) / 1e18)
        )
    }

    /// Whether a request is past retention at `cutoff`: finished before it.
    public static func isDue(_ candidate: RetentionCandidate, cutoff: Date) -> Bool {
        guard let finished = candidate.finishedAt else { return false }
        return finished < cutoff
    }

    public mutating func start() -> Action {
        guard case .idle = state else { preconditionFailure("a retention pass starts once") }
        return next()
    }

    /// The answer to ``Action/scan(after:limit:)``.
    public mutating func scanned(_ candidates: [RetentionCandidate]) -> Action {
        guard case .scanning = state else { preconditionFailure("scanned without a scan") }
        summary.scanned += candidates.count
        if candidates.count < configuration.scanLimit { scanIsOver = true }
        for candidate in candidates {
            cursor = max(cursor, candidate.seq)
            // Nothing created from the cutoff on can have finished before it: the walk ends here.
            if candidate.createdAt >= cutoff {
                scanIsOver = true
                break
            }
            if Self.isDue(candidate, cutoff: cutoff) { due.append(candidate.seq) }
        }
        return next()
    }

    /// The answer to ``Action/deleteDetails(_:limit:)``: how many rows it deleted.
    public mutating func detailsDeleted(_ count: Int) -> Action {
        guard case .deletingDetails(let batch) = state else { preconditionFailure("details deleted unasked") }
        summary.rows += count
        summary.transactions += 1
        // A full batch may have left more: ask again until one comes back short.
        if count >= configuration.rowsPerBatch {
            return .deleteDetails(batch, limit: configuration.rowsPerBatch)
        }
        state = .deletingRequests(batch)
        return .deleteRequests(batch)
    }

    /// The answer to ``Action/deleteRequests(_:)``.
    public mutating func requestsDeleted(_ pruned: PrunedRows) -> Action {
        guard case .deletingRequests = state else { preconditionFailure("requests deleted unasked") }
        summary.requests += pruned.requests
        summary.rows += pruned.rows
        summary.transactions += 1
        return next()
    }

    /// What the pass did until now (for a pass ended early).
    public var summarySoFar: Summary { summary }

    /// A full batch if there is one, else another scan, else the last short batch, else the end.
    private mutating func next() -> Action {
        if due.count >= configuration.requestsPerBatch || (scanIsOver && !due.isEmpty) {
            let batch = Array(due.prefix(configuration.requestsPerBatch))
            due.removeFirst(batch.count)
            state = .deletingDetails(batch)
            return .deleteDetails(batch, limit: configuration.rowsPerBatch)
        }
        if !scanIsOver {
            state = .scanning
            return .scan(after: cursor, limit: configuration.scanLimit)
        }
        state = .finished
        return .finished(summary)
    }
}
