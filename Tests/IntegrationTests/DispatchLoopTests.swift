import Foundation
import PushgateDispatch
import Testing

/// Transcripts of the dispatch loop's decisions: what it sees, what it does next.
@Suite("Dispatch loop as a state machine")
struct DispatchLoopTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    static func machine() -> DispatchLoop {
        DispatchLoop(idleInterval: .seconds(1), progressInterval: .milliseconds(100))
    }

    static func at(
        _ seconds: Double,
        active: Int = 0,
        allSent: Bool = true,
        unstarted: Int = 0
    ) -> DispatchLoop.Snapshot {
        DispatchLoop.Snapshot(
            now: t0.addingTimeInterval(seconds),
            active: active,
            allSent: allSent,
            unstarted: unstarted
        )
    }

    /// New work announced on an idle loop: claimed, and its chunk (a broadcast's) started in the first
    /// turn; the second turn finds it still sending.
    static func sendingAChunk() -> DispatchLoop {
        var loop = machine()
        loop.workAdded()
        #expect(loop.next(at(0)) == .claimChunk)
        loop.claimed(.found)
        #expect(loop.next(at(0, active: 1, allSent: false)) == .advance)
        #expect(loop.next(at(0, active: 1, allSent: false)) == .again)
        return loop
    }

    /// ``sendingAChunk()``, then a turn at 10 ms that only advances the chunk still sending and waits for
    /// answers: no expiry, no claim without new work.
    static func waitingForAChunksAnswers() -> DispatchLoop {
        var loop = sendingAChunk()
        #expect(loop.next(at(0.01, active: 1, allSent: false)) == .advance)
        #expect(
            loop.next(at(0.01, active: 1, allSent: false))
                == .waitForAnswers(until: t0.addingTimeInterval(0.11))
        )
        return loop
    }

    @Test(
        "idle: expire, claim, claim retries, sleep the idle interval; woken, it claims again but expires once a second"
    )
    func idleStart() {
        var loop = Self.machine()
        #expect(loop.next(Self.at(0)) == .expireOverdue)
        #expect(loop.next(Self.at(0)) == .claimChunk)
        loop.claimed(.nothing)
        #expect(loop.next(Self.at(0)) == .claimRetries)
        loop.retriesClaimed(started: false)
        #expect(loop.next(Self.at(0)) == .idle(until: Self.t0.addingTimeInterval(1)))
        // Woken at 0.5 s without new work: no expiry (within the second), a claim (nothing is under way).
        #expect(loop.next(Self.at(0.5)) == .claimChunk)
        loop.claimed(.nothing)
        #expect(loop.next(Self.at(0.5)) == .claimRetries)
    }

    @Test("new work: claimed and started at once, without an expiry before its first send")
    func newWorkGoesFirst() {
        // Claimed and advanced in the first turn; the second, still sending, neither expires nor claims.
        _ = Self.waitingForAChunksAnswers()
    }

    @Test(
        "new work announced while a broadcast's chunk is still sending is claimed at once, up to twice the limit"
    )
    func newWorkDuringABroadcast() {
        // The broadcast's chunk waits for room: no claim without new work.
        var loop = Self.waitingForAChunksAnswers()
        // A single arrives: claimed in the same turn, though the broadcast's chunk is not all sent.
        loop.workAdded()
        #expect(loop.next(Self.at(0.02, active: 1, allSent: false)) == .claimChunk)
        loop.claimed(.found)
        #expect(loop.next(Self.at(0.02, active: 1, allSent: false)) == .advance)
        #expect(loop.next(Self.at(0.02, active: 1, allSent: false)) == .again)
        #expect(loop.next(Self.at(0.03, active: 1, allSent: false)) == .advance)
        #expect(
            loop.next(Self.at(0.03, active: 1, allSent: false))
                == .waitForAnswers(until: Self.t0.addingTimeInterval(0.13))
        )
        // Three broadcast chunks under way: new work still takes more, up to six; with six, it waits.
        loop.workAdded()
        #expect(loop.next(Self.at(0.04, active: 3, allSent: false)) == .claimChunk)
        loop.claimed(.found)
        #expect(loop.next(Self.at(0.04, active: 4, allSent: false)) == .advance)
        #expect(loop.next(Self.at(0.04, active: 4, allSent: false)) == .again)
        loop.workAdded()
        #expect(loop.next(Self.at(0.05, active: 6, allSent: false)) == .advance)
    }

    @Test("new work announced at a turn's last step is claimed at the next turn, beside a chunk still sending")
    func newWorkAnnouncedDuringTheAdvance() {
        var loop = Self.sendingAChunk()
        #expect(loop.next(Self.at(0.01, active: 1, allSent: false)) == .advance)
        // Announced while the advance ran (the loop reads the announcement before asking again): the turn
        // ends with another turn, not with a wait for answers, and that turn claims.
        loop.workAdded()
        #expect(loop.next(Self.at(0.01, active: 1, allSent: false)) == .again)
        #expect(loop.next(Self.at(0.02, active: 1, allSent: false)) == .claimChunk)
        loop.claimed(.found)
        #expect(loop.next(Self.at(0.02, active: 1, allSent: false)) == .advance)
        #expect(loop.next(Self.at(0.02, active: 1, allSent: false)) == .again)
        // Claimed for: nothing more until new work.
        #expect(loop.next(Self.at(0.03, active: 1, allSent: false)) == .advance)
        #expect(
            loop.next(Self.at(0.03, active: 1, allSent: false))
                == .waitForAnswers(until: Self.t0.addingTimeInterval(0.13))
        )
    }

    @Test(
        "a chunk handed over while a broadcast's chunk is still sending starts at the next turn, announced or not"
    )
    func handedOverChunkStartsBesideAChunkStillSending() {
        var loop = Self.sendingAChunk()
        // Handed over by an enqueue's claim before its announcement was read: started all the same.
        #expect(loop.next(Self.at(0.01, active: 1, allSent: false, unstarted: 1)) == .startUnstarted)
        #expect(loop.next(Self.at(0.01, active: 1, allSent: false)) == .advance)
        #expect(loop.next(Self.at(0.01, active: 1, allSent: false)) == .again)
        // Handed over and announced: started and sent first; the claim the announcement asks for (the
        // enqueue's claim may have left other new work) comes at the next turn.
        loop.workAdded()
        #expect(loop.next(Self.at(0.02, active: 1, allSent: false, unstarted: 1)) == .startUnstarted)
        #expect(loop.next(Self.at(0.02, active: 1, allSent: false)) == .advance)
        #expect(loop.next(Self.at(0.02, active: 1, allSent: false)) == .again)
        #expect(loop.next(Self.at(0.03, active: 1, allSent: false)) == .claimChunk)
        loop.claimed(.nothing)
        #expect(loop.next(Self.at(0.03, active: 1, allSent: false)) == .advance)
        // Never during a store back-off.
        _ = loop.next(Self.at(0.03, active: 1, allSent: false))
        var down = Self.at(0.04, active: 1, allSent: false, unstarted: 1)
        down.storeAvailable = false
        #expect(loop.next(down) == .advance)
    }

    @Test("three chunks under way and all sent: a fourth waits for one of them to end, then is claimed")
    func atMostThreeChunks() throws {
        var loop = Self.machine()
        loop.workAdded()
        for active in 0..<3 {
            // The first turn without new work checks expiries once.
            if active == 1 { try #require(loop.next(Self.at(0, active: active)) == .expireOverdue) }
            try #require(loop.next(Self.at(0, active: active)) == .claimChunk)
            loop.claimed(.found)
            #expect(loop.next(Self.at(0, active: active + 1)) == .advance)
            #expect(loop.next(Self.at(0, active: active + 1)) == .again)
        }
        // Three under way, all sent, more work may exist: no claim; advance and wait.
        #expect(loop.next(Self.at(0, active: 3)) == .advance)
        #expect(loop.next(Self.at(0, active: 3)) == .waitForAnswers(until: Self.t0.addingTimeInterval(0.1)))
        #expect(loop.next(Self.at(0.05, active: 3)) == .advance)
        #expect(loop.next(Self.at(0.05, active: 3)) == .waitForAnswers(until: Self.t0.addingTimeInterval(0.15)))
        // One chunk ended: the fourth is claimed.
        #expect(loop.next(Self.at(0.1, active: 2)) == .claimChunk)
    }

    @Test("a failed claim is tried again after the store back-off, never during it")
    func storeBackoff() {
        var loop = Self.machine()
        loop.workAdded()
        #expect(loop.next(Self.at(0)) == .claimChunk)
        loop.claimed(.failed)
        var down = Self.at(0.01)
        down.storeAvailable = false
        down.storeRetryAt = Self.t0.addingTimeInterval(0.2)
        // No claim of retries and no expiry while the store backs off; the idle wait ends with the back-off.
        #expect(loop.next(down) == .idle(until: Self.t0.addingTimeInterval(0.2)))
        #expect(loop.next(down) == .idle(until: Self.t0.addingTimeInterval(0.2)))
        #expect(loop.next(Self.at(0.2)) == .expireOverdue)
        #expect(loop.next(Self.at(0.2)) == .claimChunk)
    }

    @Test("a continuous stream of new work and sends under way puts expiry off at most five seconds")
    func expiryUnderContinuousWork() {
        var loop = Self.machine()
        #expect(loop.next(Self.at(0)) == .expireOverdue)
        var expiries: [Double] = [0]
        // A new request every turn, and sends under way: the turns of 12 s, 0.1 s apart.
        for tenth in 1...120 {
            let now = Double(tenth) / 10
            let busy = Self.at(now, active: 1, allSent: false)
            loop.workAdded()
            var action = loop.next(busy)
            turn: while action != .advance {
                switch action {
                case .expireOverdue: expiries.append(now)
                case .claimRetries: loop.retriesClaimed(started: false)
                case .claimChunk: loop.claimed(.nothing)
                default:
                    Issue.record("at \(now) s: \(action)")
                    break turn
                }
                action = loop.next(busy)
            }
            _ = loop.next(busy)  // the turn's end
        }
        // Due again at 1 s and put off from then on, five seconds at most.
        #expect(expiries == [0, 6, 12], "put off, not never")
    }

    @Test("a chunk whose start failed starts before anything new is claimed")
    func unstartedFirst() {
        var loop = Self.machine()
        #expect(loop.next(Self.at(0, unstarted: 1)) == .expireOverdue)
        #expect(loop.next(Self.at(0, unstarted: 1)) == .startUnstarted)
        #expect(loop.next(Self.at(0, active: 1, allSent: false)) == .advance)
    }

    @Test("a stop withdraws once, advances what is under way until it ended, then stops; nothing is claimed")
    func stop() {
        var loop = Self.machine()
        var stopping = Self.at(0, active: 2, allSent: false)
        stopping.stopRequested = true
        #expect(loop.next(stopping) == .beginStop)
        #expect(loop.next(stopping) == .advance)
        #expect(loop.next(stopping) == .waitForAnswers(until: Self.t0.addingTimeInterval(0.1)))
        #expect(loop.next(stopping) == .advance)
        var ended = Self.at(0.2)
        ended.stopRequested = true
        #expect(loop.next(ended) == .again)
        #expect(loop.next(ended) == .stop)
    }
}
