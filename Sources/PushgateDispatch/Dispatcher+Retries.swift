import Foundation
import PushTransport
import PushgateCore
import Synchronization

extension Dispatcher {
    /// Claims the retries that are due and sends them in the background, one batch at a time, so that
    /// new chunks are claimed meanwhile. True when a batch started.
    func startRetries(now: Date, group: inout DiscardingTaskGroup) async -> Bool {
        guard !retryBatchUnderWay.load(ordering: .acquiring) else { return false }
        guard
            let claims = await storeHealth.attempt(
                .claimRetries,
                {
                    try await store.claimRetries(
                        owner: configuration.instanceID,
                        now: now,
                        leaseDuration: configuration.leaseDuration,
                        limit: configuration.retryBatch
                    )
                }
            ), !claims.isEmpty
        else { return false }
        retryBatchUnderWay.store(true, ordering: .releasing)
        group.addTask {
            await self.deliver(claims, claimedAt: now)
            self.retryBatchUnderWay.store(false, ordering: .releasing)
            self.wakeUp()
        }
        return true
    }

    /// Sends claimed retries and records their outcomes before half their lease is gone. What is
    /// still unanswered then is taken back from the transports if no connection wrote it yet, and
    /// recorded as due again at once (it never reached the service); what was written and has no
    /// answer yet is recorded as failed (`answer_timeout`), never sent again: the service may have it
    /// (issue #27: on a starved host such late answers were resent). A failed record is retried after
    /// the store back-off.
    private func deliver(_ claims: [RetryClaim], claimedAt: Date) async {
        let collector = OutcomeCollector()
        var byTag: [UInt64: (RetryClaim, NotificationRequest)] = [:]
        // One batch per request: a batch's sends share their request's prepared forms.
        var sendsByRequest: [RequestID: RoutedSends] = [:]
        var outcomes: [RetryOutcome] = []
        var tally = metrics.tally()
        /// Records one device's outcome (an answer, or one decided without sending).
        func settle(
            _ claim: RetryClaim,
            _ request: NotificationRequest,
            _ outcome: PushOutcome,
            _ disposition: OutcomeDisposition,
            now: Date
        ) {
            tally.add(outcome, disposition: disposition, request: request, now: now)
            raiseAlarmIfAny(outcome, request: request)
            outcomes.append(RetryOutcome(claim: claim, disposition: disposition))
        }
        for (index, claim) in claims.enumerated() {
            // A store error leaves the claim leased: it is claimed again when its lease runs out.
            guard let found = await storeHealth.attempt(.readRequest, { try await preparedRequest(claim.requestID) })
            else { continue }
            guard let prepared = found, routes[prepared.request.app] != nil else {
                outcomes.append(RetryOutcome(claim: claim, result: .failed(reason: "unknown_app", status: nil)))
                continue
            }
            let request = prepared.request
            if let undecided = undecidedRetries.take(claim) {
                // Its last answer waited for the misconfiguration breaker; decided now, without resending.
                let verdict = misconfiguration.resolve(undecided.ticket, now: claimedAt)
                let disposition = decided(undecided, verdict, claim: claim, request: request, now: claimedAt)
                settle(claim, request, undecided.completed.outcome, disposition, now: claimedAt)
                continue
            }
            let admission = misconfiguration.admit(app: request.app, service: claim.token.platform, now: claimedAt)
            if case .hold(let until) = admission {
                // A configuration alarm holds the app's sending on this service: the device waits again.
                let waiting = OutcomeDisposition.retry(at: claimedAt, reason: MisconfigurationMonitor.heldReason)
                let disposition = held(waiting, until: until, request: request, now: claimedAt)
                outcomes.append(RetryOutcome(claim: claim, disposition: disposition))
                tally.addHeld(service: claim.token.platform, request: request, now: claimedAt)
                continue
            }
            byTag[UInt64(index)] = (claim, request)
            sendsByRequest[request.id, default: RoutedSends()].add(claim.token, tag: UInt64(index), prepared: prepared)
        }
        /// Devices that cannot be sent fail for good at once.
        func failSetApart(_ unsendable: [UnsendablePush]) {
            for device in unsendable {
                guard let (claim, request) = byTag.removeValue(forKey: device.send.tag) else { continue }
                let disposition = self.failUnsendable(device, request: request, now: clock.now(), tally: &tally)
                outcomes.append(RetryOutcome(claim: claim, disposition: disposition))
            }
        }
        for sends in sendsByRequest.values { failSetApart(sends.unsendable) }
        // Announced before they are submitted: an answer may come before `submit` returns.
        collector.willSend(byTag.count)
        retriesInFlightCount.add(byTag.count, ordering: .relaxed)
        var submitted: [SubmittedSends] = []
        for var sends in sendsByRequest.values {
            let unsendableBefore = sends.unsendable.count
            submitted.merge(sends.submit(sentAt: claimedAt, to: collector))
            let setApart = Array(sends.unsendable.dropFirst(unsendableBefore))
            collector.willNotSend(setApart.count)
            retriesInFlightCount.subtract(setApart.count, ordering: .relaxed)
            failSetApart(setApart)
        }
        let holdUntil = claimedAt.addingTimeInterval(configuration.leaseDuration.seconds / 2)
        var unanswered = byTag
        /// Suspect answers the misconfiguration breaker has not decided yet, and when the last answer came.
        var deferred: [(claim: RetryClaim, request: NotificationRequest, outcome: DeferredOutcome)] = []
        var lastAnswer = clock.now()
        var withdrawn = false
        while !unanswered.isEmpty
            || (!deferred.isEmpty && clock.now() < lastAnswer.addingTimeInterval(Self.retryDecisionWait.seconds))
        {
            if clock.now() >= holdUntil {
                guard !withdrawn, !unanswered.isEmpty else { break }
                // Takes back what no connection has written: each completes at once as `cancelled`,
                // gathered below, then the loop ends.
                withdrawn = true
                _ = submitted.withdraw()
            }
            for completed in collector.drain() {
                guard let (claim, request) = unanswered.removeValue(forKey: completed.tag) else { continue }
                retriesInFlightCount.subtract(1, ordering: .relaxed)
                let now = clock.now()
                if withdrawn, completed.outcome.failure == .cancelled {
                    // Never written: due again at once, as if it had not been claimed.
                    outcomes.append(
                        RetryOutcome(claim: claim, result: .retry(nextAttemptAt: now, reason: "unanswered"))
                    )
                    continue
                }
                lastAnswer = now
                let disposition = random.withLock { generator in
                    OutcomeDisposition.decide(
                        completed.outcome,
                        token: claim.token,
                        attempt: claim.attempt + 1,
                        request: request,
                        policy: configuration.retryPolicy,
                        now: now,
                        using: &generator
                    )
                }
                switch misconfiguration.judge(completed.outcome, app: request.app, now: now) {
                case .proceed: settle(claim, request, completed.outcome, disposition, now: now)
                case .hold(let until):
                    let holding = held(disposition, until: until, request: request, now: now)
                    settle(claim, request, completed.outcome, holding, now: now)
                case .deferred(let ticket):
                    let item = DeferredOutcome(completed: completed, disposition: disposition, ticket: ticket)
                    deferred.append((claim, request, item))
                }
            }
            let now = clock.now()
            deferred.removeAll { claim, request, item in
                let verdict = misconfiguration.resolve(item.ticket, now: now)
                if case .deferred = verdict { return false }
                settle(
                    claim,
                    request,
                    item.completed.outcome,
                    decided(item, verdict, claim: claim, request: request, now: now),
                    now: now
                )
                return true
            }
            if (!unanswered.isEmpty && !withdrawn) || !deferred.isEmpty {
                let left = max(0, holdUntil.timeIntervalSince(clock.now()))
                await collector.signal.wait(
                    timeout: min(configuration.progressInterval, .milliseconds(Int64(left * 1000) + 1))
                )
            }
        }
        retriesInFlightCount.subtract(unanswered.count, ordering: .relaxed)
        // Written, no answer yet: the service may have it. Recorded as failed, never resent; its late
        // answer is dropped.
        let unconfirmed = PushTransportFailure.answerTimeout.label
        for (claim, _) in unanswered.values {
            outcomes.append(RetryOutcome(claim: claim, result: .failed(reason: unconfirmed, status: nil)))
        }
        // Still undecided (a quiet app: its window has not passed): the device waits until it has, and the
        // answer is decided then, when the retry is claimed again, without sending it again.
        // Counted in the metrics once decided, not now.
        for (claim, request, item) in deferred {
            let disposition = undecided(item, claim: claim, request: request, now: clock.now())
            outcomes.append(RetryOutcome(claim: claim, disposition: disposition))
        }
        while true {
            if let result = await storeHealth.attempt(
                .recordRetryOutcomes,
                {
                    try await store.recordRetryOutcomes(outcomes, owner: configuration.instanceID, now: clock.now())
                }
            ) {
                metrics.record(&tally)
                logger.debug(
                    "retries sent",
                    metadata: ["push.retries": "\(claims.count)", "push.applied": "\(result.applied)"]
                )
                break
            }
            // Not recorded: the claims stay leased and are claimed again when the lease runs out.
            if isStopping || clock.now() >= claimedAt.addingTimeInterval(configuration.leaseDuration.seconds) { return }
            let wait = max(0, (storeHealth.retryAt ?? clock.now()).timeIntervalSince(clock.now()))
            await collector.signal.wait(timeout: .milliseconds(Int64(wait * 1000) + 1))
        }
        await logCompletion(of: Array(Set(claims.map(\.requestID))))
    }

    /// How long a retry batch waits, after its last answer, for the breaker to decide its suspect answers
    /// (a busy app's come within 100 answers); a quiet app's wait in ``undecidedRetries`` instead.
    static let retryDecisionWait: Duration = .seconds(1)

    /// What a deferred answer of a retry is recorded as, once the breaker has a verdict.
    private func decided(
        _ item: DeferredOutcome,
        _ verdict: MisconfigurationBreaker.Verdict,
        claim: RetryClaim,
        request: NotificationRequest,
        now: Date
    ) -> OutcomeDisposition {
        switch verdict {
        case .proceed: return item.disposition
        case .hold(let until): return held(item.disposition, until: until, request: request, now: now)
        case .deferred: return undecided(item, claim: claim, request: request, now: now)
        }
    }

    /// A deferred answer not decided yet: kept aside (in memory) and its device due again once the breaker's
    /// window has passed, when the verdict is read instead of sending again. Not invalidated meanwhile.
    private func undecided(
        _ item: DeferredOutcome,
        claim: RetryClaim,
        request: NotificationRequest,
        now: Date
    ) -> OutcomeDisposition {
        let until = item.ticket.answeredAt.addingTimeInterval(misconfiguration.window.seconds)
        let disposition = held(item.disposition, until: until, request: request, now: now)
        // Past the request's deadline it fails as expired (not invalidated): nothing is left to decide.
        if case .retry = disposition { undecidedRetries.keep(item, for: claim) }
        return disposition
    }

    /// Notifications of the retry batch under way that are not answered yet.
    var retriesInFlight: Int { retriesInFlightCount.load(ordering: .relaxed) }
}

extension RetryOutcome {
    init(claim: RetryClaim, disposition: OutcomeDisposition) {
        switch disposition {
        case .accepted(let apnsID):
            self.init(claim: claim, result: .accepted(apnsID: apnsID))
        case .failed(let reason, let status, let invalidation):
            self.init(claim: claim, result: .failed(reason: reason, status: status), invalidation: invalidation)
        case .retry(let at, let reason):
            self.init(claim: claim, result: .retry(nextAttemptAt: at, reason: reason))
        }
    }
}

/// Retries whose last answer is waiting for the misconfiguration breaker's verdict, by request and device.
/// In memory and bounded: one lost (a restart, or beyond the bound) only means the device is sent again and
/// its answer judged afresh.
final class UndecidedRetries: Sendable {
    private struct Key: Hashable {
        var request: RequestID
        var token: DeviceToken
    }

    static let limit = 10_000
    private let items = Mutex<[Key: DeferredOutcome]>([:])

    func keep(_ item: DeferredOutcome, for claim: RetryClaim) {
        items.withLock { items in
            guard items.count < Self.limit else { return }
            items[Key(request: claim.requestID, token: claim.token)] = item
        }
    }

    func take(_ claim: RetryClaim) -> DeferredOutcome? {
        items.withLock { $0.removeValue(forKey: Key(request: claim.requestID, token: claim.token)) }
    }
}
