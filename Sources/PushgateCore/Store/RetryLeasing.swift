/// Claiming due retries (``DeliveryLedger/claimRetries(_:limit:)``) as a state machine, the same for every
/// store: overdue requests expire first (their pending retries become failures, never claims), then the
/// due rows are leased, and the claims are answered earliest first. Pure: the store runs each ``Action``
/// with its SQL in one transaction.
package struct RetryLeasing: Sendable {
    /// A retry row just leased: when it was due, its request's `seq`, and the claim's columns.
    package typealias Leased = (nextAttemptAt: Int64, seq: Int64, row: StoredForm.ClaimedRetry)

    package enum Action: Sendable, Hashable {
        /// Expire every unfinished request overdue at `lease.now` (``LedgerExpiry``); then
        /// ``overdueExpired()``.
        case expireOverdue
        /// Lease at most `limit` retry rows due at `lease.now` whose lease ended (`next_attempt_at` and
        /// `lease_expires_at` at or before it), the earliest due first (then request, then token), to
        /// `lease.owner` until `lease.expiresAt`, generation + 1 (PostgreSQL: skipping rows another
        /// instance holds); then ``leased(_:)`` with the rows, in any order.
        case leaseDue(limit: Int)
        /// The claims, earliest due first.
        case claimed([RetryClaim])
    }

    private enum State: Sendable {
        case idle
        case expiring
        case leasing
        case finished
    }

    package let lease: LeaseWindow
    package let limit: Int
    private var state = State.idle

    package init(_ lease: LeaseWindow, limit: Int) {
        self.lease = lease
        self.limit = limit
    }

    package mutating func start() -> Action {
        guard case .idle = state else { preconditionFailure("a retry claim starts once") }
        state = .expiring
        return .expireOverdue
    }

    package mutating func overdueExpired() -> Action {
        guard case .expiring = state else { preconditionFailure("expired unasked") }
        state = .leasing
        return .leaseDue(limit: limit)
    }

    /// The answer to ``Action/leaseDue(limit:)``. Throws for a stored row that does not read back.
    package mutating func leased(_ rows: [Leased]) throws -> Action {
        guard case .leasing = state else { preconditionFailure("leased unasked") }
        state = .finished
        let ordered = rows.sorted {
            ($0.nextAttemptAt, $0.seq, $0.row.token) < ($1.nextAttemptAt, $1.seq, $1.row.token)
        }
        return .claimed(try ordered.map { try StoredForm.retryClaim($0.row, lease) })
    }
}
