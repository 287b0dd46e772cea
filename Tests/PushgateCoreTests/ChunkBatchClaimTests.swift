import Foundation
import PushgateCore
import Testing

@Suite("Multi-chunk claim: candidates read once, the scheduler picks again after each cut")
struct ChunkBatchClaimTests {
    static let lease = ChunkClaimTests.lease

    static func candidate(_ seq: Int64, _ app: String = "app", lastTurn: Int64? = nil) -> ClaimScheduler.Candidate {
        ChunkClaimTests.candidate(seq, app, lastTurn: lastTurn)
    }

    /// A request of one device in one group (its id is `seq`'s), as a candidate's row reads.
    static func oneDevice(_ seq: Int64) -> ChunkClaim.CutRequest {
        ChunkClaimTests.request("r\(seq)", bound: 1_000, groupIDs: [seq])
    }

    static func chunk(_ id: Int64, of seq: Int64, _ cut: LedgerArithmetic.Cut) -> WorkChunk {
        WorkChunk.cut(id: id, of: try! RequestID("r\(seq)"), cut, leaseExpiresAt: lease.expiresAt)
    }

    static let oneMember = LedgerArithmetic.Cut(.deviceRange, after: 0, through: 1_000, cutDone: true)

    /// Cuts the one-device request `seq` that `action` asks for; answers the action after its insert.
    static func cutOneDevice(
        _ claim: inout ChunkBatchClaim,
        _ action: ChunkBatchClaim.Action,
        seq: Int64,
        id: Int64
    ) -> ChunkBatchClaim.Action {
        #expect(action == .readRequest(seq: seq))
        let scan = LedgerArithmetic.MemberScan(after: 0, bound: 1_000, limit: claim.chunkSize)
        #expect(claim.requestRead(oneDevice(seq)) == .scanMembers(seq: seq, groupIDs: [seq], scan))
        #expect(claim.membersScanned((count: 1, last: 700 + seq)) == .insertChunk(seq: seq, oneMember))
        return claim.chunkInserted(id: id)
    }

    @Test("no takeover, expiry or re-read per chunk: one read of the candidates, cut in order up to the limit")
    func oneDeviceRequests() {
        var claim = ChunkBatchClaim(Self.lease, chunkSize: 100, pageLimit: 100, maximumChunks: 2)
        #expect(claim.start() == .takeOverExpiredLease)
        #expect(claim.tookOver(nil) == .readCandidates(limit: ClaimScheduler.candidateLimit))
        #expect(claim.candidatesRead([Self.candidate(1), Self.candidate(2), Self.candidate(3)]) == .readLatestTurn)
        var action = claim.latestTurnRead(9)
        action = Self.cutOneDevice(&claim, action, seq: 1, id: 10)
        action = Self.cutOneDevice(&claim, action, seq: 2, id: 11)
        #expect(
            action == .claimed([Self.chunk(10, of: 1, Self.oneMember), Self.chunk(11, of: 2, Self.oneMember)]),
            "the limit ends the claim; request 3 waits for the next"
        )
    }

    @Test("a claim of new requests only passes over a request already cut, even one whose turn is overdue")
    func newRequestsOnly() {
        // A broadcast cut at turn 5 and a one-device request never cut; four turns since: the broadcast
        // is overdue, and an ordinary claim cuts it first.
        let waiting = [Self.candidate(1, lastTurn: 5), Self.candidate(2)]
        var ordinary = ChunkBatchClaim(Self.lease, chunkSize: 100, pageLimit: 10, maximumChunks: 50)
        _ = ordinary.start()
        _ = ordinary.tookOver(nil)
        #expect(ordinary.candidatesRead(waiting) == .readLatestTurn)
        #expect(ordinary.latestTurnRead(9) == .readRequest(seq: 1))

        var claim = ChunkBatchClaim(
            BatchClaim(lease: Self.lease, chunkSize: 100, pageLimit: 10, maximumChunks: 50, newRequestsOnly: true)
        )
        #expect(claim.start() == .takeOverExpiredLease)
        #expect(claim.tookOver(nil) == .readCandidates(limit: ClaimScheduler.candidateLimit))
        var action = claim.candidatesRead(waiting)
        action = Self.cutOneDevice(&claim, action, seq: 2, id: 10)
        #expect(action == .claimed([Self.chunk(10, of: 2, Self.oneMember)]), "the broadcast is not cut")
    }

    @Test("a chunk that may hold more than a page (a broadcast's) ends the claim")
    func largeChunkEnds() {
        var claim = ChunkBatchClaim(Self.lease, chunkSize: 100, pageLimit: 10, maximumChunks: 50)
        _ = claim.start()
        _ = claim.tookOver(nil)
        _ = claim.candidatesRead([Self.candidate(1), Self.candidate(2)])
        #expect(claim.latestTurnRead(0) == .readRequest(seq: 1))
        let cut = LedgerArithmetic.Cut(.directTokens, after: 0, through: 25, cutDone: true)
        #expect(claim.requestRead(ChunkClaimTests.request("r1", tokenCount: 25)) == .insertChunk(seq: 1, cut))
        #expect(claim.chunkInserted(id: 4) == .claimed([Self.chunk(4, of: 1, cut)]))

        var members = ChunkBatchClaim(Self.lease, chunkSize: 100, pageLimit: 10, maximumChunks: 50)
        _ = members.start()
        _ = members.tookOver(nil)
        _ = members.candidatesRead([Self.candidate(1)])
        _ = members.requestRead(Self.oneDevice(1))
        let large = LedgerArithmetic.Cut(.deviceRange, after: 0, through: 400, cutDone: false)
        #expect(members.membersScanned((count: 100, last: 400)) == .insertChunk(seq: 1, large))
        #expect(members.chunkInserted(id: 4) == .claimed([Self.chunk(4, of: 1, large)]))
    }

    @Test("takeovers first, one at a time, until one whose rest may not fit a page")
    func takeovers() {
        func taken(_ id: Int64, rest: Int64) -> WorkChunk {
            WorkChunk(
                id: id,
                requestID: try! RequestID("t\(id)"),
                kind: .directTokens,
                after: 0,
                through: 100,
                progress: 100 - rest,
                leaseGeneration: 2,
                leaseExpiresAt: Self.lease.expiresAt,
                isTakeover: true
            )
        }
        var claim = ChunkBatchClaim(Self.lease, chunkSize: 100, pageLimit: 10, maximumChunks: 50)
        _ = claim.start()
        #expect(claim.tookOver(taken(1, rest: 10)) == .takeOverExpiredLease)
        #expect(claim.tookOver(taken(2, rest: 11)) == .claimed([taken(1, rest: 10), taken(2, rest: 11)]))

        var small = ChunkBatchClaim(Self.lease, chunkSize: 100, pageLimit: 10, maximumChunks: 50)
        _ = small.start()
        _ = small.tookOver(taken(1, rest: 1))
        #expect(small.tookOver(nil) == .readCandidates(limit: ClaimScheduler.candidateLimit), "then new cuts")
    }

    @Test("used-up candidates are read again only after a full read of which some were cut through")
    func readAgain() {
        var claim = ChunkBatchClaim(Self.lease, chunkSize: 100, pageLimit: 100, maximumChunks: 500)
        _ = claim.start()
        _ = claim.tookOver(nil)
        let full = (1...Int64(ClaimScheduler.candidateLimit)).map { Self.candidate($0) }
        _ = claim.candidatesRead(full)
        var action = claim.latestTurnRead(0)
        for seq in full.map(\.seq) { action = Self.cutOneDevice(&claim, action, seq: seq, id: 100 + seq) }
        #expect(action == .readCandidates(limit: ClaimScheduler.candidateLimit))
        // Not full: what it found is all there is.
        action = claim.candidatesRead([Self.candidate(65)])
        action = Self.cutOneDevice(&claim, action, seq: 65, id: 200)
        guard case .claimed(let chunks) = action else {
            Issue.record("expected the claim's end, got \(action)")
            return
        }
        #expect(chunks.map(\.id) == (101...164).map { Int64($0) } + [200])
    }

    @Test("a request held elsewhere or cut through meanwhile leaves the candidates; none left: the claim ends")
    func heldElsewhere() {
        var claim = ChunkBatchClaim(Self.lease, chunkSize: 100, pageLimit: 100, maximumChunks: 10)
        _ = claim.start()
        _ = claim.tookOver(nil)
        _ = claim.candidatesRead([Self.candidate(1), Self.candidate(2)])
        #expect(claim.latestTurnRead(0) == .readRequest(seq: 1))
        #expect(claim.requestRead(nil) == .readRequest(seq: 2))
        #expect(claim.requestRead(nil) == .claimed([]), "nothing was cut through: no second read")
    }

    @Test("a request with no member left is marked cut through and checked, then the next is cut")
    func cutThrough() {
        var claim = ChunkBatchClaim(Self.lease, chunkSize: 100, pageLimit: 100, maximumChunks: 10)
        _ = claim.start()
        _ = claim.tookOver(nil)
        _ = claim.candidatesRead([Self.candidate(1), Self.candidate(2)])
        _ = claim.latestTurnRead(0)
        _ = claim.requestRead(Self.oneDevice(1))
        #expect(claim.membersScanned((count: 0, last: nil)) == .markCutDone(seq: 1))
        #expect(claim.cutMarkedDone() == .finishIfDone(seq: 1))
        let action = claim.completionChecked()
        #expect(Self.cutOneDevice(&claim, action, seq: 2, id: 5) == .claimed([Self.chunk(5, of: 2, Self.oneMember)]))
    }

    @Test("the scheduler sees this claim's own cuts: one chunk per request, and apps alternate")
    func turnsMoveOn() {
        // One app: request 1 has two tokens and chunks of one; after its first, new request 2 goes first.
        var claim = ChunkBatchClaim(Self.lease, chunkSize: 1, pageLimit: 10, maximumChunks: 10)
        _ = claim.start()
        _ = claim.tookOver(nil)
        _ = claim.candidatesRead([Self.candidate(1), Self.candidate(2)])
        #expect(claim.latestTurnRead(5) == .readRequest(seq: 1))
        let first = LedgerArithmetic.Cut(.directTokens, after: 0, through: 1, cutDone: false)
        #expect(claim.requestRead(ChunkClaimTests.request("r1", tokenCount: 2)) == .insertChunk(seq: 1, first))
        #expect(claim.chunkInserted(id: 6) == .readRequest(seq: 2))
        let only = LedgerArithmetic.Cut(.directTokens, after: 0, through: 1, cutDone: true)
        #expect(claim.requestRead(ChunkClaimTests.request("r2", tokenCount: 1)) == .insertChunk(seq: 2, only))
        #expect(
            claim.chunkInserted(id: 7) == .claimed([Self.chunk(6, of: 1, first), Self.chunk(7, of: 2, only)]),
            "one chunk per request in a claim: request 1's next one waits for the next claim"
        )

        // Two apps: after a's chunk, b's turn is the oldest.
        var apps = ChunkBatchClaim(Self.lease, chunkSize: 100, pageLimit: 100, maximumChunks: 10)
        _ = apps.start()
        _ = apps.tookOver(nil)
        _ = apps.candidatesRead([Self.candidate(1, "a"), Self.candidate(2, "a"), Self.candidate(3, "b")])
        _ = apps.latestTurnRead(100)
        var action = apps.recentTurnsRead([:])
        action = Self.cutOneDevice(&apps, action, seq: 1, id: 101)
        action = Self.cutOneDevice(&apps, action, seq: 3, id: 102)
        action = Self.cutOneDevice(&apps, action, seq: 2, id: 103)
        let order: [(id: Int64, seq: Int64)] = [(101, 1), (102, 3), (103, 2)]
        #expect(action == .claimed(order.map { Self.chunk($0.id, of: $0.seq, Self.oneMember) }))
    }
}
