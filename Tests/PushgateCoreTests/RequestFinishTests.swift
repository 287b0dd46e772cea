import Foundation
import PushgateCore
import Testing

@Suite("Finishing a request: read, decide, then write and forget its removed targets")
struct RequestFinishTests {
    @Test("a complete request is marked done, then its removed targets are forgotten")
    func complete() {
        var finish = RequestFinish(seq: 3, nowMillis: 900)
        #expect(finish.start() == .readCompletion(seq: 3))
        let completion = RequestCompletion(state: 1, cutDone: true, hasOpenChunks: false, hasPendingRetries: false)
        #expect(finish.completionRead(completion) == .markFinished(seq: 3, .done, nowMillis: 900))
        #expect(finish.marked() == .forgetRemovedTargets(seq: 3))
        #expect(finish.forgotten() == .finished)
    }

    @Test("an incomplete, finished or missing request: nothing is written")
    func nothingWritten() {
        for completion in [
            RequestCompletion(state: 1, cutDone: true, hasOpenChunks: true, hasPendingRetries: false),
            RequestCompletion(state: 3, cutDone: true, hasOpenChunks: false, hasPendingRetries: false),
            nil,
        ] {
            var finish = RequestFinish(seq: 3, nowMillis: 900)
            _ = finish.start()
            #expect(finish.completionRead(completion) == .finished)
        }
    }
}

@Suite("Claiming retries: expire first, then lease, earliest due first")
struct RetryLeasingTests {
    static let lease = LeaseWindow(
        owner: InstanceID("a"),
        now: Date(timeIntervalSince1970: 1_800_000_000),
        duration: .seconds(60)
    )
    static let tokenA = String(repeating: "aa", count: 32)
    static let tokenB = String(repeating: "bb", count: 32)

    @Test("rows leased in any order are answered by due time, then request, then token")
    func order() throws {
        var claim = RetryLeasing(Self.lease, limit: 10)
        #expect(claim.start() == .expireOverdue)
        #expect(claim.overdueExpired() == .leaseDue(limit: 10))
        let rows: [RetryLeasing.Leased] = [
            (nextAttemptAt: 20, seq: 1, row: ("r1", Self.tokenA, 1, "x", 2)),
            (nextAttemptAt: 10, seq: 2, row: ("r2", Self.tokenB, 2, "y", 3)),
            (nextAttemptAt: 10, seq: 2, row: ("r2", Self.tokenA, 1, "y", 2)),
        ]
        guard case .claimed(let claims) = try claim.leased(rows) else {
            Issue.record("no claims")
            return
        }
        #expect(claims.map(\.requestID.value) == ["r2", "r2", "r1"])
        #expect(claims.map(\.token.storageKey) == [Self.tokenA, Self.tokenB, Self.tokenA])
        #expect(claims.map(\.leaseGeneration) == [2, 3, 2])
        #expect(claims.allSatisfy { $0.leaseExpiresAt == Self.lease.expiresAt })
    }
}
