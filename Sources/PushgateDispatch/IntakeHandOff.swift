package import PushgateCore

/// How many chunks the intake's group commits may claim with their enqueue, and the chunks they claimed
/// for the loop to start: a pure value, kept under the dispatcher's lock.
///
/// The loop sets the room at each turn: the chunks it could still take under way (``Dispatcher/Configuration/maximumChunksUnderWay``
/// less those under way and not started yet) less those that claims already under way reserved. A
/// claim reserves what it may take before its write and gives back what it did not take after; what
/// it took waits in ``handed`` until the loop's next turn counts it as not started. So claims made one
/// after the other between two turns of the loop never take more than the loop has room for, and none
/// has to wait for the loop's turn in between.
///
/// A hand-off that closed after each claim until the loop's next turn (the earlier rule) left every
/// other group commit of a steady stream of one-device requests without a claim: the loop then claimed
/// those requests in transactions of its own (with a fsync each), which read their groups and members
/// again (docs/benchmarks.md: end to end the change is inside the run-to-run spread).
package struct IntakeHandOff {
    /// The loop would claim new work now (its own rule, ``DispatchLoop``), and is not stopping.
    package private(set) var isOpen = false
    /// Claims take new requests only (``BatchClaim/newRequestsOnly``).
    package private(set) var newRequestsOnly = false
    /// Chunks a claim may still take before the loop's next turn.
    package private(set) var room = 0
    /// Chunks reserved by claims under way.
    package private(set) var reserved = 0
    /// Claims under way.
    package private(set) var claimsUnderWay = 0
    /// Chunks claimed with an enqueue that the loop has not taken yet.
    package private(set) var handed: [ClaimedWork] = []
    /// Closed by a stop: no turn of the loop opens it again.
    private var closed = false

    package init() {}

    /// A claim the intake may make: at most `maximumChunks` chunks (reserved until ``claimEnded(_:claimed:)``).
    package struct Reservation: Equatable, Sendable {
        package var maximumChunks: Int
        package var newRequestsOnly: Bool
    }

    /// A group commit with requests is about to write: the claim it may make with them, if any.
    package mutating func reserve(upTo batchLimit: Int) -> Reservation? {
        guard isOpen, room > 0, batchLimit > 0 else { return nil }
        let chunks = min(room, batchLimit)
        room -= chunks
        reserved += chunks
        claimsUnderWay += 1
        return Reservation(maximumChunks: chunks, newRequestsOnly: newRequestsOnly)
    }

    /// The claim of `reservation` committed with `claimed` chunks (none if its write failed).
    package mutating func claimEnded(_ reservation: Reservation, claimed: [ClaimedWork]) {
        assert(claimsUnderWay > 0 && reserved >= reservation.maximumChunks, "a claim ends once")
        assert(claimed.count <= reservation.maximumChunks, "a claim takes at most what it reserved")
        claimsUnderWay = max(0, claimsUnderWay - 1)
        reserved = max(0, reserved - reservation.maximumChunks)
        room += max(0, reservation.maximumChunks - claimed.count)
        handed.append(contentsOf: claimed)
    }

    /// The loop's turn begins: the chunks handed over since the last one, for the loop to start.
    package mutating func takeHanded() -> [ClaimedWork] {
        defer { handed.removeAll() }
        return handed
    }

    /// The loop's turn, after ``takeHanded()``: whether it would claim now, whether beside a broadcast's
    /// chunks only new requests, and how many more chunks it has room for (those under way and not
    /// started subtracted, the handed ones among them).
    package mutating func loopTurn(mayClaim: Bool, newRequestsOnly: Bool, room loopRoom: Int) {
        isOpen = mayClaim && !closed
        self.newRequestsOnly = newRequestsOnly
        room = max(0, loopRoom - reserved - handed.count)
    }

    /// Closed for good: the dispatcher stops.
    package mutating func close() {
        closed = true
        isOpen = false
        room = 0
    }
}
