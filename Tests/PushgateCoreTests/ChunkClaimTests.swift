import Foundation
import PushgateCore
import Testing

@Suite("Chunk claim steps: expire, take over, else cut what the scheduler picks")
struct ChunkClaimTests {
    static let lease = LeaseWindow(
        owner: InstanceID("a"),
        now: Date(timeIntervalSince1970: 1_800_000_000),
        duration: .seconds(60)
    )

    static func request(
        _ id: String,
        bound: Int64 = 0,
        groupCut: Int64 = 0,
        tokenCut: Int64 = 0,
        tokenCount: Int64 = 0,
        groupIDs: [Int64] = []
    ) -> ChunkClaim.CutRequest {
        ChunkClaim.CutRequest(
            id: try! RequestID(id),
            bound: bound,
            groupCut: groupCut,
            tokenCut: tokenCut,
            tokenCount: tokenCount,
            groupIDs: groupIDs
        )
    }

    static func candidate(_ seq: Int64, _ app: String = "app", lastTurn: Int64? = nil) -> ClaimScheduler.Candidate {
        ClaimScheduler.Candidate(seq: seq, app: app, urgent: false, lastTurn: lastTurn)
    }

    @Test("overdue requests are expired before anything is claimed; a takeover ends the claim")
    func takeover() {
        var claim = ChunkClaim(Self.lease, chunkSize: 10)
        #expect(claim.start() == .expireOverdue)
        #expect(claim.overdueExpired() == .takeOverExpiredLease)
        let chunk = WorkChunk(
            id: 7,
            requestID: try! RequestID("r"),
            kind: .deviceRange,
            after: 0,
            through: 10,
            progress: 4,
            leaseGeneration: 2,
            leaseExpiresAt: Self.lease.expiresAt,
            isTakeover: true
        )
        #expect(claim.tookOver(chunk) == .claimed(chunk))
    }

    @Test("no takeover and no candidate: nothing to claim")
    func nothing() {
        var claim = ChunkClaim(Self.lease, chunkSize: 10)
        _ = claim.start()
        _ = claim.overdueExpired()
        #expect(claim.tookOver(nil) == .readCandidates(limit: ClaimScheduler.candidateLimit))
        #expect(claim.candidatesRead([]) == .claimed(nil))
    }

    @Test("one candidate is cut without reading turns: direct tokens first, a chunk size at a time")
    func tokens() {
        var claim = ChunkClaim(Self.lease, chunkSize: 10)
        _ = claim.start()
        _ = claim.overdueExpired()
        _ = claim.tookOver(nil)
        #expect(claim.candidatesRead([Self.candidate(3)]) == .readRequest(seq: 3))
        let cut = LedgerArithmetic.Cut(.directTokens, after: 0, through: 10, cutDone: false)
        #expect(
            claim.requestRead(Self.request("r", bound: 50, tokenCount: 25, groupIDs: [1])) == .insertChunk(seq: 3, cut)
        )
        #expect(
            claim.chunkInserted(id: 12)
                == .claimed(WorkChunk.cut(id: 12, of: try! RequestID("r"), cut, leaseExpiresAt: Self.lease.expiresAt))
        )
    }

    @Test("group members are scanned, and a short scan cuts through to the bound")
    func members() {
        var claim = ChunkClaim(Self.lease, chunkSize: 10)
        _ = claim.start()
        _ = claim.overdueExpired()
        _ = claim.tookOver(nil)
        _ = claim.candidatesRead([Self.candidate(3)])
        let scan = LedgerArithmetic.MemberScan(after: 20, bound: 90, limit: 10)
        #expect(
            claim.requestRead(Self.request("r", bound: 90, groupCut: 20, groupIDs: [1, 2]))
                == .scanMembers(groupIDs: [1, 2], scan)
        )
        #expect(
            claim.membersScanned((count: 4, last: 60))
                == .insertChunk(seq: 3, LedgerArithmetic.Cut(.deviceRange, after: 20, through: 90, cutDone: true))
        )
    }

    @Test("a request with no member left is marked cut through, checked for completion, and the next one picked")
    func cutThrough() {
        var claim = ChunkClaim(Self.lease, chunkSize: 10)
        _ = claim.start()
        _ = claim.overdueExpired()
        _ = claim.tookOver(nil)
        _ = claim.candidatesRead([Self.candidate(3)])
        _ = claim.requestRead(Self.request("r", bound: 90, groupCut: 20, groupIDs: [1]))
        #expect(claim.membersScanned((count: 0, last: nil)) == .markCutDone(seq: 3))
        #expect(claim.cutMarkedDone() == .finishIfDone(seq: 3))
        #expect(claim.completionChecked() == .readCandidates(limit: ClaimScheduler.candidateLimit))
        #expect(claim.candidatesRead([]) == .claimed(nil))
    }

    @Test("a request cut through by another instance meanwhile: the candidates are read again")
    func lostRace() {
        var claim = ChunkClaim(Self.lease, chunkSize: 10)
        _ = claim.start()
        _ = claim.overdueExpired()
        _ = claim.tookOver(nil)
        _ = claim.candidatesRead([Self.candidate(3)])
        #expect(claim.requestRead(nil) == .readCandidates(limit: ClaimScheduler.candidateLimit))
    }

    @Test("several candidates of one app: the newest turn only; of several apps: their recent turns")
    func turns() {
        var oneApp = ChunkClaim(Self.lease, chunkSize: 10)
        _ = oneApp.start()
        _ = oneApp.overdueExpired()
        _ = oneApp.tookOver(nil)
        #expect(oneApp.candidatesRead([Self.candidate(3, lastTurn: 1), Self.candidate(4)]) == .readLatestTurn)
        // A request never served goes before the remaining chunks of older ones.
        #expect(oneApp.latestTurnRead(2) == .readRequest(seq: 4))

        var twoApps = ChunkClaim(Self.lease, chunkSize: 10)
        _ = twoApps.start()
        _ = twoApps.overdueExpired()
        _ = twoApps.tookOver(nil)
        #expect(
            twoApps.candidatesRead([Self.candidate(3, "a", lastTurn: 300), Self.candidate(4, "b")]) == .readLatestTurn
        )
        #expect(twoApps.latestTurnRead(300) == .readRecentTurns(after: 300 - ClaimScheduler.recentTurnWindow))
        // App b's last turn (among recent chunks) is older than a's: b goes next.
        #expect(twoApps.recentTurnsRead(["a": 300, "b": 299]) == .readRequest(seq: 4))
    }
}

@Suite("Expiry steps: retries failed, unsent targets counted, chunks closed")
struct LedgerExpiryTests {
    static func overdue(
        _ seq: Int64,
        tokenCut: Int64 = 0,
        tokenCount: Int64 = 0,
        groupCut: Int64 = 0,
        bound: Int64 = 0,
        cutDone: Bool = false
    ) -> LedgerExpiry.Overdue {
        LedgerExpiry.Overdue(
            seq: seq,
            id: try! RequestID("r\(seq)"),
            app: "app",
            bound: bound,
            groupCut: groupCut,
            tokenCut: tokenCut,
            tokenCount: tokenCount,
            cutDone: cutDone,
            createdAt: 500
        )
    }

    @Test("nothing overdue: nothing written")
    func nothing() {
        var expiry = LedgerExpiry(nowMillis: 1_000)
        #expect(expiry.start() == .readOverdue(nowMillis: 1_000))
        #expect(expiry.overdueRead([]) == .finished([]))
    }

    @Test("an open chunk's rest and the uncut tokens and members are counted: removed targets before members")
    func counts() {
        var expiry = LedgerExpiry(nowMillis: 1_000)
        _ = expiry.start()
        #expect(
            expiry.overdueRead([Self.overdue(5, tokenCut: 2, tokenCount: 3, groupCut: 40, bound: 100)])
                == .failRetries(seq: 5, nowMillis: 1_000)
        )
        #expect(expiry.retriesFailed(2) == .readUnsent(seq: 5))
        #expect(
            expiry.unsentRead(groupIDs: [9], openChunks: [(kind: .deviceRange, progress: 30, through: 40)])
                == .countRemovedTargets(seq: 5, after: 30, through: 40)
        )
        #expect(expiry.counted(1) == .countDeviceTargets(groupIDs: [9], after: 30, through: 40, invalidatedSince: 500))
        #expect(
            expiry.counted(6)
                == .countTokenTargets(seq: 5, app: "app", after: 2, through: 3, invalidatedSince: 500)
        )
        #expect(expiry.counted(1) == .countRemovedTargets(seq: 5, after: 40, through: 100))
        #expect(expiry.counted(0) == .countDeviceTargets(groupIDs: [9], after: 40, through: 100, invalidatedSince: 500))
        // 2 retries + 1 removed + 6 members + 1 token + 0 + 10 members.
        #expect(expiry.counted(10) == .addExpiredCount(seq: 5, count: 20))
        #expect(expiry.failuresCounted() == .close(seq: 5, nowMillis: 1_000))
        #expect(expiry.closed() == .finished([try! RequestID("r5")]))
    }

    @Test("a request with nothing unsent adds no count; requests expire in the order read")
    func severalRequests() {
        var expiry = LedgerExpiry(nowMillis: 1_000)
        _ = expiry.start()
        _ = expiry.overdueRead([Self.overdue(5, cutDone: true), Self.overdue(6, tokenCount: 1)])
        _ = expiry.retriesFailed(0)
        #expect(expiry.unsentRead(groupIDs: [], openChunks: []) == .close(seq: 5, nowMillis: 1_000))
        #expect(expiry.closed() == .failRetries(seq: 6, nowMillis: 1_000))
        // The count starts again for each request.
        #expect(expiry.retriesFailed(0) == .readUnsent(seq: 6))
        #expect(
            expiry.unsentRead(groupIDs: [], openChunks: [])
                == .countTokenTargets(seq: 6, app: "app", after: 0, through: 1, invalidatedSince: 500)
        )
        #expect(expiry.counted(1) == .addExpiredCount(seq: 6, count: 1))
        _ = expiry.failuresCounted()
        #expect(expiry.closed() == .finished([try! RequestID("r5"), try! RequestID("r6")]))
    }
}
