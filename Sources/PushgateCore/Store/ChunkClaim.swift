/// One claim of fan-out work (``DeliveryLedger/claimChunk(_:chunkSize:)``) as a state machine, the same
/// for every store: which step comes when, what is cut and what the claim answers. Pure: the store runs
/// each ``Action`` with its SQL, inside the claim's one transaction, and reports the answer with the next
/// event. Each store keeps only its statements (and its locks: PostgreSQL skips rows another instance
/// holds, and locks the request it cuts).
///
/// The steps:
/// 0. Expire the overdue requests first: their chunks are closed, so nobody claims them.
/// 1. Take over a chunk whose holder stopped renewing its lease (the oldest request's first).
/// 2. Else cut the next chunk of the request ``ClaimScheduler`` picks: direct tokens first, then group
///    members (``LedgerArithmetic/nextCut(_:chunkSize:)``). A request with no member left to cut is
///    marked cut through, checked for completion, and the next one is picked.
package struct ChunkClaim: Sendable {
    /// A request whose next chunk is cut, as read (PostgreSQL: locked) for the cut.
    package struct CutRequest: Sendable, Hashable {
        package var id: RequestID
        /// `device_bound`, `group_cut`, `token_cut`, `token_count` as stored.
        package var bound: Int64
        package var groupCut: Int64
        package var tokenCut: Int64
        package var tokenCount: Int64
        /// The request's target groups (`request_group`), ascending.
        package var groupIDs: [Int64]

        package init(
            id: RequestID,
            bound: Int64,
            groupCut: Int64,
            tokenCut: Int64,
            tokenCount: Int64,
            groupIDs: [Int64]
        ) {
            self.id = id
            self.bound = bound
            self.groupCut = groupCut
            self.tokenCut = tokenCut
            self.tokenCount = tokenCount
            self.groupIDs = groupIDs
        }

        var cursor: LedgerArithmetic.CutCursor {
            LedgerArithmetic.CutCursor(
                stored: (bound, groupCut, tokenCut, tokenCount),
                hasGroups: !groupIDs.isEmpty
            )
        }
    }

    package enum Action: Sendable, Hashable {
        /// Expire every unfinished request overdue at `lease.now` (``LedgerExpiry``); then
        /// ``overdueExpired()``.
        case expireOverdue
        /// Take over the first open chunk (in request, then chunk order) whose lease ended at or before
        /// `lease.now`: lease it to `lease.owner` until `lease.expiresAt`, generation + 1. Then
        /// ``tookOver(_:)`` with the chunk (``StoredForm/chunk(takenOver:_:)``), or nil.
        case takeOverExpiredLease
        /// Read the oldest unfinished requests with uncut targets, at most `limit`, in `seq` order, each
        /// with its newest chunk's id; then ``candidatesRead(_:)``.
        case readCandidates(limit: Int)
        /// Read the newest chunk id of all (0 without chunks); then ``latestTurnRead(_:)``.
        case readLatestTurn
        /// Read, per app, the newest id among the chunks with an id above `after`; then
        /// ``recentTurnsRead(_:)``.
        case readRecentTurns(after: Int64)
        /// Read the request's cut cursors and groups (PostgreSQL: lock its row first); then
        /// ``requestRead(_:)``, with nil when it is finished or cut through meanwhile.
        case readRequest(seq: Int64)
        /// Read the member ids (valid or not) of the groups that the scan covers, distinct, ascending,
        /// at most `scan.limit`: how many and the last; then ``membersScanned(_:)``.
        case scanMembers(groupIDs: [Int64], LedgerArithmetic.MemberScan)
        /// Nothing of the request is left to cut: set `cut_done`; then ``cutMarkedDone()``.
        case markCutDone(seq: Int64)
        /// Mark the request done if it is complete (``RequestCompletion``); then ``completionChecked()``.
        case finishIfDone(seq: Int64)
        /// Move the request's cursor of `cut.kind` to `cut.through`, store `cut.cutDone`, raise its state
        /// to at least `sending`, and insert the chunk, open, leased to `lease.owner` until
        /// `lease.expiresAt`, generation 1, progress at its start; then ``chunkInserted(id:)``.
        case insertChunk(seq: Int64, LedgerArithmetic.Cut)
        /// The claim is over: the chunk claimed, or nil when there is nothing to claim.
        case claimed(WorkChunk?)
    }

    private enum State: Sendable {
        case idle
        case expiring
        case takingOver
        case readingCandidates
        case readingLatestTurn([ClaimScheduler.Candidate])
        case readingRecentTurns([ClaimScheduler.Candidate])
        case readingRequest(seq: Int64)
        case scanningMembers(seq: Int64, CutRequest, LedgerArithmetic.MemberScan)
        case markingCutDone(seq: Int64)
        case checkingCompletion
        case inserting(CutRequest, LedgerArithmetic.Cut)
        case finished
    }

    package let lease: LeaseWindow
    package let chunkSize: Int
    private var state = State.idle

    package init(_ lease: LeaseWindow, chunkSize: Int) {
        self.lease = lease
        self.chunkSize = chunkSize
    }

    package mutating func start() -> Action {
        guard case .idle = state else { preconditionFailure("a claim starts once") }
        state = .expiring
        return .expireOverdue
    }

    package mutating func overdueExpired() -> Action {
        guard case .expiring = state else { preconditionFailure("expired unasked") }
        state = .takingOver
        return .takeOverExpiredLease
    }

    package mutating func tookOver(_ chunk: WorkChunk?) -> Action {
        guard case .takingOver = state else { preconditionFailure("took over unasked") }
        if let chunk { return finish(chunk) }
        return readCandidates()
    }

    /// The answer to ``Action/readCandidates(limit:)``.
    package mutating func candidatesRead(_ candidates: [ClaimScheduler.Candidate]) -> Action {
        guard case .readingCandidates = state else { preconditionFailure("candidates read unasked") }
        // One candidate (the common case) needs no turns: it is the one.
        guard candidates.count > 1 else { return cut(candidates.first?.seq) }
        state = .readingLatestTurn(candidates)
        return .readLatestTurn
    }

    /// The answer to ``Action/readLatestTurn``.
    package mutating func latestTurnRead(_ latest: Int64) -> Action {
        guard case .readingLatestTurn(let candidates) = state else { preconditionFailure("turn read unasked") }
        guard Set(candidates.map(\.app)).count > 1 else {
            // One app: its turn does not matter, only the newest turn (for who is overdue).
            return cut(ClaimScheduler.next(candidates, recentAppTurns: [candidates[0].app: latest]))
        }
        state = .readingRecentTurns(candidates)
        return .readRecentTurns(after: latest - ClaimScheduler.recentTurnWindow)
    }

    /// The answer to ``Action/readRecentTurns(after:)``: the newest chunk id of each app among them.
    package mutating func recentTurnsRead(_ turns: [String: Int64]) -> Action {
        guard case .readingRecentTurns(let candidates) = state else { preconditionFailure("turns read unasked") }
        return cut(ClaimScheduler.next(candidates, recentAppTurns: turns))
    }

    /// The answer to ``Action/readRequest(seq:)``: nil when it no longer has targets to cut (another
    /// instance finished cutting it meanwhile): the next candidate is picked.
    package mutating func requestRead(_ request: CutRequest?) -> Action {
        guard case .readingRequest(let seq) = state else { preconditionFailure("request read unasked") }
        guard let request else { return readCandidates() }
        switch LedgerArithmetic.nextCut(request.cursor, chunkSize: chunkSize) {
        case .tokens(let cut):
            state = .inserting(request, cut)
            return .insertChunk(seq: seq, cut)
        case .members(let scan):
            state = .scanningMembers(seq: seq, request, scan)
            return .scanMembers(groupIDs: request.groupIDs, scan)
        }
    }

    /// The answer to ``Action/scanMembers(groupIDs:_:)``.
    package mutating func membersScanned(_ found: (count: Int, last: Int64?)) -> Action {
        guard case .scanningMembers(let seq, let request, let scan) = state else {
            preconditionFailure("members scanned unasked")
        }
        guard let cut = scan.cut(found: found) else {
            state = .markingCutDone(seq: seq)
            return .markCutDone(seq: seq)
        }
        state = .inserting(request, cut)
        return .insertChunk(seq: seq, cut)
    }

    package mutating func cutMarkedDone() -> Action {
        guard case .markingCutDone(let seq) = state else { preconditionFailure("cut marked done unasked") }
        state = .checkingCompletion
        return .finishIfDone(seq: seq)
    }

    package mutating func completionChecked() -> Action {
        guard case .checkingCompletion = state else { preconditionFailure("completion checked unasked") }
        return readCandidates()
    }

    /// The answer to ``Action/insertChunk(seq:_:)``: the new chunk's id.
    package mutating func chunkInserted(id: Int64) -> Action {
        guard case .inserting(let request, let cut) = state else { preconditionFailure("chunk inserted unasked") }
        return finish(WorkChunk.cut(id: id, of: request.id, cut, leaseExpiresAt: lease.expiresAt))
    }

    private mutating func readCandidates() -> Action {
        state = .readingCandidates
        return .readCandidates(limit: ClaimScheduler.candidateLimit)
    }

    /// Cuts the request picked, or ends the claim when none was.
    private mutating func cut(_ seq: Int64?) -> Action {
        guard let seq else { return finish(nil) }
        state = .readingRequest(seq: seq)
        return .readRequest(seq: seq)
    }

    private mutating func finish(_ chunk: WorkChunk?) -> Action {
        state = .finished
        return .claimed(chunk)
    }
}
