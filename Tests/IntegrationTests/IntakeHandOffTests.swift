import Foundation
import PushgateCore
import Testing

@testable import PushgateDispatch

/// The hand-off between the intake's group commits and the dispatch loop, as a pure transcript: claims
/// made one after another between two turns of the loop share the room the loop has, and none waits for
/// the loop's turn in between.
@Suite("Dispatcher: the intake's hand-off")
struct IntakeHandOffTests {
    static func claimed(_ count: Int, from first: Int64 = 1) -> [ClaimedWork] {
        (0..<count).map { offset in
            ClaimedWork(
                chunk: WorkChunk(
                    id: first + Int64(offset),
                    requestID: try! RequestID("r\(first + Int64(offset))"),
                    kind: .deviceRange,
                    after: 0,
                    through: 1,
                    progress: 0,
                    leaseGeneration: 1,
                    leaseExpiresAt: Date(timeIntervalSince1970: 60),
                    isTakeover: false
                ),
                firstPage: TargetPage(targets: [], scannedThrough: 1, isEnd: true)
            )
        }
    }

    @Test("closed until the loop's first turn; then claims reserve from its room, each capped by the batch limit")
    func reservations() {
        var handOff = IntakeHandOff()
        #expect(handOff.reserve(upTo: 64) == nil, "the loop has not said it would claim")
        handOff.loopTurn(mayClaim: true, newRequestsOnly: false, room: 100)
        let first = handOff.reserve(upTo: 64)
        #expect(first == .init(maximumChunks: 64, newRequestsOnly: false))
        let second = handOff.reserve(upTo: 64)
        #expect(second?.maximumChunks == 36, "what is left of the loop's room")
        #expect(handOff.reserve(upTo: 64) == nil, "no room left")
        #expect(handOff.claimsUnderWay == 2)
    }

    @Test("a claim gives back what it did not take; what it took waits for the loop and counts against the room")
    func claimsEndBetweenTurns() {
        var handOff = IntakeHandOff()
        handOff.loopTurn(mayClaim: true, newRequestsOnly: false, room: 100)
        let first = handOff.reserve(upTo: 64)!
        handOff.claimEnded(first, claimed: Self.claimed(10))
        #expect(handOff.room == 90, "54 of the 64 reserved come back")
        // The next group commit claims at once, before the loop's turn.
        let second = handOff.reserve(upTo: 64)!
        #expect(second.maximumChunks == 64)
        handOff.claimEnded(second, claimed: Self.claimed(64, from: 11))
        #expect(handOff.room == 26)
        // The loop's turn takes the 74 handed over; a claim ending between its take and its new room counts.
        #expect(handOff.takeHanded().count == 74)
        let third = handOff.reserve(upTo: 64)!
        #expect(third.maximumChunks == 26)
        handOff.claimEnded(third, claimed: Self.claimed(6, from: 75))
        // The loop counted the 74 it took as not started: 100 - 74 = 26 room, less the 6 handed since.
        handOff.loopTurn(mayClaim: true, newRequestsOnly: false, room: 26)
        #expect(handOff.room == 20)
        #expect(handOff.takeHanded().count == 6)
    }

    @Test("a claim under way at the loop's turn keeps its reservation out of the new room")
    func reservationSurvivesTheTurn() {
        var handOff = IntakeHandOff()
        handOff.loopTurn(mayClaim: true, newRequestsOnly: false, room: 50)
        let claim = handOff.reserve(upTo: 40)!
        handOff.loopTurn(mayClaim: true, newRequestsOnly: true, room: 50)
        #expect(handOff.room == 10)
        #expect(handOff.reserve(upTo: 40) == .init(maximumChunks: 10, newRequestsOnly: true))
        handOff.claimEnded(claim, claimed: [])
        #expect(handOff.room == 40, "a failed write gives all its reservation back")
    }

    @Test("a loop that would not claim closes it; a stop closes it for good")
    func closing() {
        var handOff = IntakeHandOff()
        handOff.loopTurn(mayClaim: false, newRequestsOnly: false, room: 100)
        #expect(handOff.reserve(upTo: 64) == nil)
        handOff.loopTurn(mayClaim: true, newRequestsOnly: false, room: 100)
        let claim = handOff.reserve(upTo: 64)!
        handOff.close()
        handOff.loopTurn(mayClaim: true, newRequestsOnly: false, room: 100)
        #expect(handOff.reserve(upTo: 64) == nil, "no turn reopens it after a stop")
        #expect(handOff.claimsUnderWay == 1, "the stop waits for this claim")
        handOff.claimEnded(claim, claimed: Self.claimed(1))
        #expect(handOff.claimsUnderWay == 0)
    }
}
