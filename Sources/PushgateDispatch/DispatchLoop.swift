package import Foundation

/// The dispatch loop's decisions as a pure state machine: given what the loop sees (a ``Snapshot``)
/// it answers the next ``Action``; the loop performs it (store calls, sends, waits) and asks again.
/// Claims report back through ``claimed(_:)`` and ``retriesClaimed(started:)``.
///
/// Rules: the next chunk is claimed as soon as everything of the chunks under way is sent (at most
/// ``maximumActiveChunks`` under way), and, when new work was announced, at the loop's next turn even
/// while a chunk is still sending, with up to twice the limit under way (so a one-device request sent
/// during a broadcast is claimed, and goes first by ``ClaimScheduler``, instead of waiting for the
/// broadcast's chunk to be sent). Announced work is remembered until a claim is made for it, whichever
/// step of a turn it was announced at. Chunks already claimed (handed over by an enqueue's claim, or
/// whose start failed) start at the next turn whatever is under way (they are ours, and waiting only
/// holds them back), and are advanced before anything else is claimed. A claim that found nothing is not repeated until new work is announced; due retries
/// are claimed when no chunk is under way, and also while chunks are under way at most once per
/// ``idleInterval``, so that continuous new work never starves them; overdue requests are expired at
/// most once a second, and not between a new request and its first send nor while sends are under way
/// unless the last expiry is ``expiryDeferredAtMost`` old; nothing touches the store
/// during a store back-off; a stop withdraws what is unsent and ends once nothing is under way.
package struct DispatchLoop: Sendable {
    package struct Snapshot: Sendable, Equatable {
        package var now: Date
        package var stopRequested = false
        /// Chunks under way, and whether every target of them has been sent. The dispatcher counts the
        /// chunks whose targets all came in their first page (one-device requests) as one together.
        package var active = 0
        package var allSent = true
        /// Claimed chunks whose start failed (a store error): they start before anything new is claimed.
        package var unstarted = 0
        /// False during a store back-off, which ends at `storeRetryAt`.
        package var storeAvailable = true
        package var storeRetryAt: Date? = nil

        package init(
            now: Date,
            stopRequested: Bool = false,
            active: Int = 0,
            allSent: Bool = true,
            unstarted: Int = 0,
            storeAvailable: Bool = true,
            storeRetryAt: Date? = nil
        ) {
            self.now = now
            self.stopRequested = stopRequested
            self.active = active
            self.allSent = allSent
            self.unstarted = unstarted
            self.storeAvailable = storeAvailable
            self.storeRetryAt = storeRetryAt
        }
    }

    package enum Action: Sendable, Equatable {
        /// Withdraw what the chunks under way have not sent; wait for their answers until the grace period ends.
        case beginStop
        /// Leave the loop: stopping, and nothing is under way.
        case stop
        case expireOverdue
        case startUnstarted
        case claimChunk
        case claimRetries
        /// Gather outcomes, send within the budget, read ahead and record, for every chunk under way.
        case advance
        /// Ask again at once (what was just done may allow more).
        case again
        /// Nothing to do: wait for a signal, at most until `until` (or the store's next wake-up, if earlier).
        case idle(until: Date)
        /// Chunks are under way: wait for answers or a signal, at most until `until`.
        case waitForAnswers(until: Date)
    }

    package enum ClaimResult: Sendable, Equatable {
        case found, nothing, failed
    }

    private enum Phase: Equatable {
        case turnStart
        case claim
        case awaitingClaim
        case afterClaim(claimed: Bool)
        case awaitingRetries
        case afterRetries(started: Bool)
        case afterAdvance(claimed: Bool)
    }

    /// Seconds an expiry may be put off by new work or sends under way: the claims leave overdue requests
    /// out without expiring them, so a continuous stream must not keep them from being expired.
    package static let expiryDeferredAtMost: TimeInterval = 5

    package let maximumActiveChunks: Int
    package let idleInterval: Duration
    package let progressInterval: Duration
    private var phase = Phase.turnStart
    private(set) var stopping = false
    /// False once a claim found nothing, until new work is announced.
    private(set) var mayHaveChunks = true
    /// New work was announced during this turn: no expiry before it is sent.
    private var freshWork = false
    /// New work was announced and no claim was made since: it may be claimed beside a chunk still sending.
    private var claimWanted = false
    private var lastExpiry = Date.distantPast
    /// Since when an expiry that was due has been put off (new work, sends under way).
    private var expiryPutOffAt: Date?
    /// When retries were last claimed (first: when the loop started): beside chunks under way they are
    /// claimed once this is an idle interval old.
    private var lastRetryClaim: Date?
    /// Whether this turn's chunk claim found one, kept across a retry claim beside chunks under way.
    private var claimedBeforeRetries = false

    package init(maximumActiveChunks: Int = 3, idleInterval: Duration, progressInterval: Duration) {
        self.maximumActiveChunks = maximumActiveChunks
        self.idleInterval = idleInterval
        self.progressInterval = progressInterval
    }

    /// A request was added (here or by another instance): there may be chunks to claim.
    package mutating func workAdded() {
        mayHaveChunks = true
        freshWork = true
        claimWanted = true
    }

    package mutating func claimed(_ result: ClaimResult) {
        precondition(phase == .awaitingClaim, "claimed(_:) answers .claimChunk")
        if result != .nothing { mayHaveChunks = true }
        phase = .afterClaim(claimed: result == .found)
    }

    package mutating func retriesClaimed(started: Bool) {
        precondition(phase == .awaitingRetries, "retriesClaimed(started:) answers .claimRetries")
        phase = .afterRetries(started: started)
    }

    package mutating func next(_ snapshot: Snapshot) -> Action {
        switch phase {
        case .turnStart:
            if lastRetryClaim == nil { lastRetryClaim = snapshot.now }
            if snapshot.stopRequested, !stopping {
                stopping = true
                return .beginStop
            }
            if stopping, snapshot.active == 0 { return .stop }
            phase = .claim
            if snapshot.storeAvailable, !stopping, snapshot.now.timeIntervalSince(lastExpiry) >= 1 {
                let putOff = expiryPutOffAt ?? snapshot.now
                if !freshWork && snapshot.allSent || snapshot.now.timeIntervalSince(putOff) >= Self.expiryDeferredAtMost
                {
                    lastExpiry = snapshot.now
                    expiryPutOffAt = nil
                    return .expireOverdue
                }
                expiryPutOffAt = putOff
            }
            return next(snapshot)
        case .claim:
            if !stopping, snapshot.storeAvailable, snapshot.unstarted > 0 {
                // Sent before anything else is claimed: a claim announced with them waits for the next turn.
                phase = .afterClaim(claimed: true)
                return .startUnstarted
            }
            return claimOrCarryOn(snapshot)
        case .awaitingClaim, .awaitingRetries:
            preconditionFailure("the loop must report the claim's result first")
        case .afterClaim(let claimed):
            if snapshot.active > 0 {
                if !stopping, snapshot.storeAvailable, snapshot.unstarted == 0,
                    snapshot.now.timeIntervalSince(lastRetryClaim ?? snapshot.now) >= idleInterval.seconds
                {
                    claimedBeforeRetries = claimed
                    return claimRetries(snapshot)
                }
                phase = .afterAdvance(claimed: claimed)
                return .advance
            }
            if claimed || stopping { return endTurn(.again) }
            if snapshot.storeAvailable, snapshot.unstarted == 0 { return claimRetries(snapshot) }
            return endTurn(.idle(until: deadline(after: idleInterval, snapshot)))
        case .afterRetries(let started):
            if snapshot.active > 0 {
                // Claimed beside chunks under way: carry on with them in this turn.
                phase = .afterAdvance(claimed: claimedBeforeRetries)
                return .advance
            }
            return endTurn(started ? .again : .idle(until: deadline(after: idleInterval, snapshot)))
        case .afterAdvance(let claimed):
            let storeUsable = snapshot.storeAvailable && !stopping
            let mayStartMore =
                storeUsable
                && (snapshot.unstarted > 0 || (mayHaveChunks && mayClaim(snapshot)))
            if claimed || snapshot.active == 0 || mayStartMore { return endTurn(.again) }
            return endTurn(.waitForAnswers(until: deadline(after: progressInterval, snapshot)))
        }
    }

    /// Whether a claim may add to what is under way: nothing is; everything is sent and there is room
    /// under the limit; or new work waits and there is room under twice the limit (a broadcast's chunks
    /// wait for their answers, a round trip, before they end, and a single must not wait for that; nor
    /// when the claim made for it took the broadcast's next chunk instead: ``ClaimScheduler``'s rule
    /// against starvation).
    private func mayClaim(_ snapshot: Snapshot) -> Bool {
        !stopping && snapshot.storeAvailable
            && (snapshot.active == 0
                || (snapshot.active < maximumActiveChunks && snapshot.allSent)
                || (snapshot.active < 2 * maximumActiveChunks && claimWanted))
    }

    /// The turn's claim, if one may be made; otherwise on to the chunks under way.
    private mutating func claimOrCarryOn(_ snapshot: Snapshot) -> Action {
        if mayClaim(snapshot), snapshot.active == 0 || mayHaveChunks {
            mayHaveChunks = false
            claimWanted = false
            phase = .awaitingClaim
            return .claimChunk
        }
        phase = .afterClaim(claimed: false)
        return next(snapshot)
    }

    private mutating func claimRetries(_ snapshot: Snapshot) -> Action {
        lastRetryClaim = snapshot.now
        phase = .awaitingRetries
        return .claimRetries
    }

    private mutating func endTurn(_ action: Action) -> Action {
        phase = .turnStart
        freshWork = false
        return action
    }

    /// `interval` from now, or the end of the store back-off if that is sooner.
    private func deadline(after interval: Duration, _ snapshot: Snapshot) -> Date {
        let end = snapshot.now.addingTimeInterval(interval.seconds)
        guard let retryAt = snapshot.storeRetryAt else { return end }
        return min(end, max(snapshot.now, retryAt))
    }
}
