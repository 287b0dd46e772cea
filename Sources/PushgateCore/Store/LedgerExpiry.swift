/// Expiring the overdue requests (``DeliveryLedger/expireOverdue(now:)``, and the first step of every
/// claim) as a state machine, the same for every store: what is counted as failed "expired", in which
/// order the rows change. Pure: the store runs each ``Action`` with its SQL, all in one transaction, and
/// reports the answer with the next event.
///
/// Per overdue request: its pending retries become failure rows; the targets never sent (the rest of
/// each open chunk after its progress, and everything not cut yet: ``LedgerArithmetic/unsentRanges``)
/// are counted, without a row each; the count is added to the request's failures by reason; its open
/// chunks are closed (their holders' progress is refused from then on) and it is marked expired.
package struct LedgerExpiry: Sendable {
    /// An unfinished request whose expiration passed, as read.
    package struct Overdue: Sendable, Hashable {
        package var seq: Int64
        package var id: RequestID
        package var app: String
        /// `device_bound`, `group_cut`, `token_cut`, `token_count` and `cut_done` as stored.
        package var bound: Int64
        package var groupCut: Int64
        package var tokenCut: Int64
        package var tokenCount: Int64
        package var cutDone: Bool
        /// `created_at`, stored milliseconds.
        package var createdAt: Int64

        package init(
            seq: Int64,
            id: RequestID,
            app: String,
            bound: Int64,
            groupCut: Int64,
            tokenCut: Int64,
            tokenCount: Int64,
            cutDone: Bool,
            createdAt: Int64
        ) {
            self.seq = seq
            self.id = id
            self.app = app
            self.bound = bound
            self.groupCut = groupCut
            self.tokenCut = tokenCut
            self.tokenCount = tokenCount
            self.cutDone = cutDone
            self.createdAt = createdAt
        }
    }

    /// An open chunk of an expiring request: `kind`, `progress`, `range_through`.
    package typealias OpenChunk = (kind: WorkChunk.Kind, progress: Int64, through: Int64)

    package enum Action: Sendable, Hashable {
        /// Read the unfinished requests with an expiration (`expiration > 0`) before `nowMillis`
        /// (PostgreSQL: locking them, skipping those another instance holds); then ``overdueRead(_:)``.
        case readOverdue(nowMillis: Int64)
        /// A failure row (reason ``FailureEntry/expiredReason``, no status, at `nowMillis`) for each
        /// pending retry of the request, unless the device failed already, then delete its retries;
        /// then ``retriesFailed(_:)`` with the number of failure rows written.
        case failRetries(seq: Int64, nowMillis: Int64)
        /// Read the request's groups (`request_group`) and its open chunks; then ``unsentRead(groupIDs:openChunks:)``.
        case readUnsent(seq: Int64)
        /// Count the device ids in `(after, through]` recorded as removed from the request's groups
        /// and not members of them now; then ``counted(_:)``.
        case countRemovedTargets(seq: Int64, after: Int64, through: Int64)
        /// Count the distinct devices of the groups in `(after, through]`, valid or invalidated at or
        /// after `invalidatedSince` (no page read them, so those invalidated since the request was stored
        /// count here too: its target count includes them); then ``counted(_:)``.
        case countDeviceTargets(groupIDs: [Int64], after: Int64, through: Int64, invalidatedSince: Int64)
        /// Count the request's direct tokens in positions `(after, through]` as a page would read them,
        /// with those invalidated at or after `invalidatedSince`; then ``counted(_:)``.
        case countTokenTargets(seq: Int64, app: String, after: Int64, through: Int64, invalidatedSince: Int64)
        /// Add `count` failures with reason ``FailureEntry/expiredReason`` to the request's counts by
        /// reason; then ``failuresCounted()``.
        case addExpiredCount(seq: Int64, count: Int)
        /// Close the request's open chunks (generation + 1: their holders' writes are refused), mark it
        /// expired, finished at `nowMillis` and cut through, and forget its removed targets; then
        /// ``closed()``.
        case close(seq: Int64, nowMillis: Int64)
        /// Done: the requests expired, in the order read.
        case finished([RequestID])
    }

    private enum State: Sendable {
        case idle
        case reading
        case failingRetries
        case readingUnsent
        case counting(groupIDs: [Int64], ranges: ArraySlice<LedgerArithmetic.UnsentRange>, removedCounted: Bool)
        case addingCount
        case closing
        case finished
    }

    package let nowMillis: Int64
    private var state = State.idle
    private var overdue: ArraySlice<Overdue> = []
    private var expiredCount = 0
    private var expired: [RequestID] = []

    package init(nowMillis: Int64) {
        self.nowMillis = nowMillis
    }

    package mutating func start() -> Action {
        guard case .idle = state else { preconditionFailure("an expiry starts once") }
        state = .reading
        return .readOverdue(nowMillis: nowMillis)
    }

    /// The answer to ``Action/readOverdue(nowMillis:)``.
    package mutating func overdueRead(_ requests: [Overdue]) -> Action {
        guard case .reading = state else { preconditionFailure("overdue read unasked") }
        overdue = requests[...]
        return nextRequest()
    }

    /// The answer to ``Action/failRetries(seq:nowMillis:)``: failure rows written.
    package mutating func retriesFailed(_ count: Int) -> Action {
        guard case .failingRetries = state, let request = overdue.first else {
            preconditionFailure("retries failed unasked")
        }
        expiredCount = count
        state = .readingUnsent
        return .readUnsent(seq: request.seq)
    }

    /// The answer to ``Action/readUnsent(seq:)``.
    package mutating func unsentRead(groupIDs: [Int64], openChunks: [OpenChunk]) -> Action {
        guard case .readingUnsent = state, let request = overdue.first else {
            preconditionFailure("unsent read unasked")
        }
        let cursor = LedgerArithmetic.CutCursor(
            tokenCut: request.tokenCut,
            tokenCount: request.tokenCount,
            groupCut: request.groupCut,
            bound: request.bound,
            hasGroups: !groupIDs.isEmpty
        )
        let ranges = LedgerArithmetic.unsentRanges(openChunks: openChunks, cursor: cursor, cutDone: request.cutDone)
        state = .counting(groupIDs: groupIDs, ranges: ranges[...], removedCounted: false)
        return nextCount()
    }

    /// The answer to a count (``Action/countRemovedTargets(seq:after:through:)``,
    /// ``Action/countDeviceTargets(groupIDs:after:through:invalidatedSince:)``,
    /// ``Action/countTokenTargets(seq:app:after:through:invalidatedSince:)``).
    package mutating func counted(_ count: Int) -> Action {
        guard case .counting(let groupIDs, var ranges, let removedCounted) = state, let range = ranges.first else {
            preconditionFailure("counted unasked")
        }
        expiredCount += count
        if range.kind == .deviceRange && !removedCounted {
            // The removed targets of a device range first, then its members.
            state = .counting(groupIDs: groupIDs, ranges: ranges, removedCounted: true)
        } else {
            ranges.removeFirst()
            state = .counting(groupIDs: groupIDs, ranges: ranges, removedCounted: false)
        }
        return nextCount()
    }

    package mutating func failuresCounted() -> Action {
        guard case .addingCount = state, let request = overdue.first else {
            preconditionFailure("failures counted unasked")
        }
        state = .closing
        return .close(seq: request.seq, nowMillis: nowMillis)
    }

    package mutating func closed() -> Action {
        guard case .closing = state, let request = overdue.popFirst() else { preconditionFailure("closed unasked") }
        expired.append(request.id)
        return nextRequest()
    }

    private mutating func nextRequest() -> Action {
        guard let request = overdue.first else {
            state = .finished
            return .finished(expired)
        }
        expiredCount = 0
        state = .failingRetries
        return .failRetries(seq: request.seq, nowMillis: nowMillis)
    }

    /// The next count of the request's unsent ranges, or its expired count once they are all counted.
    private mutating func nextCount() -> Action {
        guard case .counting(let groupIDs, let ranges, let removedCounted) = state, let request = overdue.first else {
            preconditionFailure("no count under way")
        }
        guard let range = ranges.first else {
            guard expiredCount > 0 else {
                state = .closing
                return .close(seq: request.seq, nowMillis: nowMillis)
            }
            state = .addingCount
            return .addExpiredCount(seq: request.seq, count: expiredCount)
        }
        switch range.kind {
        case .deviceRange where !removedCounted:
            return .countRemovedTargets(seq: request.seq, after: range.after, through: range.through)
        case .deviceRange:
            return .countDeviceTargets(
                groupIDs: groupIDs,
                after: range.after,
                through: range.through,
                invalidatedSince: request.createdAt
            )
        case .directTokens:
            return .countTokenTargets(
                seq: request.seq,
                app: request.app,
                after: range.after,
                through: range.through,
                invalidatedSince: request.createdAt
            )
        }
    }
}
