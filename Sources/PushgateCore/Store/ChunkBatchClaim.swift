/// A claim of many chunks in one transaction (``DeliveryLedger/claimChunks(_:)``) as a state machine, the
/// same for every store. Under a backlog of one-device requests a claim per chunk cost a transaction, a
/// read of the scheduler's candidates and a scan for overdue requests per request; this claim reads the
/// candidates once and lets ``ClaimScheduler`` pick again from what it knows after each cut.
///
/// The steps:
/// 1. Take over chunks whose holder stopped renewing its lease, one at a time (the oldest request's first).
/// 2. Then cut the chunks of the requests ``ClaimScheduler`` picks, as ``ChunkClaim`` does, one chunk per
///    request: a request cut leaves this claim's candidates, and its app's turn is the new chunk's id. So
///    a claim takes many one-device requests, but a broadcast's chunks one per claim as before (with
///    several PostgreSQL instances, each takes its share). The candidates are read again only when they
///    are used up, the read was full, and some request was cut through since; those cut already in this
///    claim are left out of the new read.
/// 3. The claim ends at `maximumChunks`, or after a chunk that may hold more than `pageLimit` targets (a
///    broadcast's: the dispatcher bounds how many of those are under way), or when nothing is left.
///
/// A claim of *new requests only* (``BatchClaim/newRequestsOnly``) leaves the requests already cut out
/// of its candidates (``ClaimScheduler``'s rule against starvation would otherwise give a broadcast's
/// next chunk the place of the one-device request the claim was made for); takeovers are as above.
///
/// Overdue requests are not expired here (``DeliveryLedger/expireOverdue(now:)`` is the dispatcher's,
/// once a second): the store leaves them out of the takeovers and the candidates, so no chunk of an
/// overdue request is claimed, and a claim no longer scans every unfinished request for them.
package struct ChunkBatchClaim: Sendable {
    package enum Action: Sendable, Hashable {
        /// Take over the first open chunk (in request, then chunk order) whose lease ended at or before
        /// `lease.now` and whose request is not overdue at `lease.now`, as ``ChunkClaim`` does; then
        /// ``tookOver(_:)``.
        case takeOverExpiredLease
        /// As ``ChunkClaim/Action/readCandidates(limit:)``, leaving out the requests overdue at
        /// `lease.now`; then ``candidatesRead(_:)``.
        case readCandidates(limit: Int)
        /// As in ``ChunkClaim``: then ``latestTurnRead(_:)``.
        case readLatestTurn
        /// As in ``ChunkClaim``: then ``recentTurnsRead(_:)``.
        case readRecentTurns(after: Int64)
        /// As in ``ChunkClaim``; PostgreSQL may skip a row another instance holds (answering nil). Then
        /// ``requestRead(_:)``.
        case readRequest(seq: Int64)
        /// As in ``ChunkClaim``, naming the request (`seq`) whose members are scanned: then
        /// ``membersScanned(_:)``.
        case scanMembers(seq: Int64, groupIDs: [Int64], LedgerArithmetic.MemberScan)
        /// As in ``ChunkClaim``: then ``cutMarkedDone()``.
        case markCutDone(seq: Int64)
        /// As in ``ChunkClaim``: then ``completionChecked()``.
        case finishIfDone(seq: Int64)
        /// As in ``ChunkClaim``: then ``chunkInserted(id:)``.
        case insertChunk(seq: Int64, LedgerArithmetic.Cut)
        /// The claim is over: the chunks claimed, in claim order (empty when there is nothing to claim).
        case claimed([WorkChunk])
    }

    private enum State: Sendable {
        case idle
        case takingOver
        case readingCandidates
        case readingLatestTurn
        case readingRecentTurns
        case readingRequest(seq: Int64)
        case scanningMembers(seq: Int64, ChunkClaim.CutRequest, LedgerArithmetic.MemberScan)
        case markingCutDone(seq: Int64)
        case checkingCompletion(seq: Int64)
        case inserting(seq: Int64, ChunkClaim.CutRequest, LedgerArithmetic.Cut, fitsOnePage: Bool)
        case finished
    }

    package let lease: LeaseWindow
    package let chunkSize: Int
    package let pageLimit: Int
    package let maximumChunks: Int
    package let newRequestsOnly: Bool
    private var state = State.idle
    private var chunks: [WorkChunk] = []
    /// The scheduler's view, kept up to date by this claim's own cuts.
    private var candidates: [ClaimScheduler.Candidate] = []
    private var turns: [String: Int64] = [:]
    /// The last read returned `candidateLimit` rows: there may be more behind them.
    private var readWasFull = false
    /// Requests cut through since the last read: a new read can find others.
    private var cutThroughSinceRead = 0
    /// Requests cut (or found with nothing left to cut) in this claim: one chunk each.
    private var served: Set<Int64> = []

    package init(
        _ lease: LeaseWindow,
        chunkSize: Int,
        pageLimit: Int,
        maximumChunks: Int,
        newRequestsOnly: Bool = false
    ) {
        precondition(chunkSize > 0 && pageLimit > 0 && maximumChunks > 0, "a claim of at least one target and chunk")
        self.lease = lease
        self.chunkSize = chunkSize
        self.pageLimit = pageLimit
        self.maximumChunks = maximumChunks
        self.newRequestsOnly = newRequestsOnly
    }

    package init(_ claim: BatchClaim) {
        self.init(
            claim.lease,
            chunkSize: claim.chunkSize,
            pageLimit: claim.pageLimit,
            maximumChunks: claim.maximumChunks,
            newRequestsOnly: claim.newRequestsOnly
        )
    }

    package mutating func start() -> Action {
        guard case .idle = state else { preconditionFailure("a claim starts once") }
        state = .takingOver
        return .takeOverExpiredLease
    }

    /// The answer to ``Action/takeOverExpiredLease``. A chunk whose rest may not fit one page ends the
    /// claim (its range bounds its targets: positions, or distinct device ids).
    package mutating func tookOver(_ chunk: WorkChunk?) -> Action {
        guard case .takingOver = state else { preconditionFailure("took over unasked") }
        guard let chunk else { return readCandidates() }
        chunks.append(chunk)
        if chunks.count >= maximumChunks || chunk.through - chunk.progress > Int64(pageLimit) { return finish() }
        return .takeOverExpiredLease
    }

    /// The answer to ``Action/readCandidates(limit:)``.
    package mutating func candidatesRead(_ read: [ClaimScheduler.Candidate]) -> Action {
        guard case .readingCandidates = state else { preconditionFailure("candidates read unasked") }
        candidates = read.filter { !served.contains($0.seq) && (!newRequestsOnly || $0.lastTurn == nil) }
        turns = [:]
        readWasFull = read.count >= ClaimScheduler.candidateLimit
        cutThroughSinceRead = 0
        // One candidate needs no turns: it is the one.
        guard candidates.count > 1 else { return pickNext() }
        state = .readingLatestTurn
        return .readLatestTurn
    }

    /// The answer to ``Action/readLatestTurn``.
    package mutating func latestTurnRead(_ latest: Int64) -> Action {
        guard case .readingLatestTurn = state else { preconditionFailure("turn read unasked") }
        guard Set(candidates.map(\.app)).count > 1 else {
            turns = [candidates[0].app: latest]
            return pickNext()
        }
        state = .readingRecentTurns
        return .readRecentTurns(after: latest - ClaimScheduler.recentTurnWindow)
    }

    /// The answer to ``Action/readRecentTurns(after:)``.
    package mutating func recentTurnsRead(_ recent: [String: Int64]) -> Action {
        guard case .readingRecentTurns = state else { preconditionFailure("turns read unasked") }
        turns = recent
        return pickNext()
    }

    /// The answer to ``Action/readRequest(seq:)``: nil when it has nothing left to cut (or another instance
    /// holds it): it leaves this claim's candidates.
    package mutating func requestRead(_ request: ChunkClaim.CutRequest?) -> Action {
        guard case .readingRequest(let seq) = state else { preconditionFailure("request read unasked") }
        guard let request else {
            candidates.removeAll { $0.seq == seq }
            return pickNext()
        }
        switch LedgerArithmetic.nextCut(request.cursor, chunkSize: chunkSize) {
        case .tokens(let cut):
            state = .inserting(seq: seq, request, cut, fitsOnePage: cut.through - cut.after <= Int64(pageLimit))
            return .insertChunk(seq: seq, cut)
        case .members(let scan):
            state = .scanningMembers(seq: seq, request, scan)
            return .scanMembers(seq: seq, groupIDs: request.groupIDs, scan)
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
        state = .inserting(seq: seq, request, cut, fitsOnePage: found.count <= pageLimit)
        return .insertChunk(seq: seq, cut)
    }

    package mutating func cutMarkedDone() -> Action {
        guard case .markingCutDone(let seq) = state else { preconditionFailure("cut marked done unasked") }
        state = .checkingCompletion(seq: seq)
        return .finishIfDone(seq: seq)
    }

    package mutating func completionChecked() -> Action {
        guard case .checkingCompletion(let seq) = state else { preconditionFailure("completion checked unasked") }
        leave(seq, cutThrough: true)
        return pickNext()
    }

    /// The answer to ``Action/insertChunk(seq:_:)``: the new chunk's id, which is also its request's turn.
    package mutating func chunkInserted(id: Int64) -> Action {
        guard case .inserting(let seq, let request, let cut, let fitsOnePage) = state else {
            preconditionFailure("chunk inserted unasked")
        }
        chunks.append(WorkChunk.cut(id: id, of: request.id, cut, leaseExpiresAt: lease.expiresAt))
        if let app = candidates.first(where: { $0.seq == seq })?.app { turns[app] = id }
        leave(seq, cutThrough: cut.cutDone)
        guard fitsOnePage else { return finish() }
        return pickNext()
    }

    private mutating func leave(_ seq: Int64, cutThrough: Bool) {
        candidates.removeAll { $0.seq == seq }
        served.insert(seq)
        if cutThrough { cutThroughSinceRead += 1 }
    }

    private mutating func readCandidates() -> Action {
        state = .readingCandidates
        return .readCandidates(limit: ClaimScheduler.candidateLimit)
    }

    private mutating func pickNext() -> Action {
        guard chunks.count < maximumChunks else { return finish() }
        guard let seq = ClaimScheduler.next(candidates, recentAppTurns: turns) else {
            return readWasFull && cutThroughSinceRead > 0 ? readCandidates() : finish()
        }
        state = .readingRequest(seq: seq)
        return .readRequest(seq: seq)
    }

    private mutating func finish() -> Action {
        state = .finished
        return .claimed(chunks)
    }
}
