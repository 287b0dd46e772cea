import Foundation
import PushgateDispatch
import Testing

/// Found by the one-hour soak (docs/reliability.md, "Soak"): by its documented rule the loop claims
/// retries only in a turn with no chunk under way, so under continuous new work the retries that are
/// due are never sent and their requests stay in progress (in the soak, for more than 30 minutes).
/// A known issue until the loop also claims due retries while chunks are active (say at most once
/// per idle interval); this test then fails ("known issue was not recorded"): drop `withKnownIssue`.
@Suite("Dispatch loop under continuous load")
struct DispatchLoopStarvationTests {
    @Test("due retries are claimed within a minute even when new chunks keep coming")
    func retriesAreNotStarved() {
        var loop = DispatchLoop(idleInterval: .seconds(1), progressInterval: .milliseconds(100))
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        var retryClaims = 0
        // 60 s of turns, 0.1 s apart; one chunk always under way and a new request each turn.
        for turn in 0..<600 {
            loop.workAdded()
            let snapshot = DispatchLoop.Snapshot(
                now: start.addingTimeInterval(Double(turn) / 10),
                active: 1,
                allSent: true,
                unstarted: 0
            )
            for _ in 0..<4 {
                switch loop.next(snapshot) {
                case .claimChunk: loop.claimed(.found)
                case .claimRetries:
                    retryClaims += 1
                    loop.retriesClaimed(started: true)
                default: break
                }
            }
        }
        withKnownIssue("retries are claimed only when no chunk is under way (soak, 2026-11-25)") {
            #expect(retryClaims > 0)
        }
    }
}
