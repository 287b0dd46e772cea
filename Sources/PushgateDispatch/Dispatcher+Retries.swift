import Foundation
import PushTransport
import PushgateCore

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
        var sendsByApp: [String: RoutedSends] = [:]
        var outcomes: [RetryOutcome] = []
        var tally = metrics.tally()
        for (index, claim) in claims.enumerated() {
            // A store error leaves the claim leased: it is claimed again when its lease runs out.
            guard let found = await storeHealth.attempt(.readRequest, { try await preparedRequest(claim.requestID) })
            else { continue }
            guard let prepared = found, let route = routes[prepared.request.app] else {
                outcomes.append(RetryOutcome(claim: claim, result: .failed(reason: "unknown_app", status: nil)))
                continue
            }
            byTag[UInt64(index)] = (claim, prepared.request)
            sendsByApp[prepared.request.app, default: RoutedSends()].add(
                claim.token,
                tag: UInt64(index),
                prepared: prepared,
                route: route,
                receiver: collector,
                now: claimedAt
            )
        }
        for sends in sendsByApp.values {
            for device in sends.unsendable {
                guard let (claim, request) = byTag.removeValue(forKey: device.tag) else { continue }
                let disposition = failUnsendable(device, request: request, now: clock.now(), tally: &tally)
                outcomes.append(RetryOutcome(claim: claim, disposition: disposition))
            }
        }
        collector.willSend(byTag.count)
        retriesInFlightCount.add(byTag.count, ordering: .relaxed)
        var submitted: [(route: DeliveryRoute, ids: (apns: [UInt64], fcm: [UInt64]))] = []
        for (app, sends) in sendsByApp {
            if let route = routes[app] { submitted.append((route, sends.submit(to: route))) }
        }
        let holdUntil = claimedAt.addingTimeInterval(configuration.leaseDuration.seconds / 2)
        var unanswered = byTag
        var withdrawn = false
        while !unanswered.isEmpty {
            if clock.now() >= holdUntil {
                guard !withdrawn else { break }
                // Takes back what no connection has written: each completes at once as `cancelled`,
                // gathered below, then the loop ends.
                withdrawn = true
                for (route, ids) in submitted {
                    _ = route.transport.withdraw(ids.apns)
                    if let fcm = route.fcm { _ = fcm.withdraw(ids.fcm) }
                }
            }
            for completed in collector.drain() {
                guard let (claim, request) = unanswered.removeValue(forKey: completed.tag) else { continue }
                retriesInFlightCount.subtract(1, ordering: .relaxed)
                let now = clock.now()
                if withdrawn, completed.outcome.transportFailure == .cancelled {
                    // Never written: due again at once, as if it had not been claimed.
                    outcomes.append(
                        RetryOutcome(claim: claim, result: .retry(nextAttemptAt: now, reason: "unanswered"))
                    )
                    continue
                }
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
                tally.add(completed.outcome, disposition: disposition, request: request, now: now)
                raiseAlarmIfAny(completed.outcome, request: request)
                outcomes.append(RetryOutcome(claim: claim, disposition: disposition))
            }
            if !unanswered.isEmpty, !withdrawn {
                let left = max(0, holdUntil.timeIntervalSince(clock.now()))
                await collector.signal.wait(
                    timeout: min(configuration.progressInterval, .milliseconds(Int64(left * 1000) + 1))
                )
            }
        }
        retriesInFlightCount.subtract(unanswered.count, ordering: .relaxed)
        // Written, no answer yet: the service may have it. Recorded as failed, never resent; its late
        // answer is dropped.
        let unconfirmed = APNsTransportFailure.answerTimeout.label
        for (claim, _) in unanswered.values {
            outcomes.append(RetryOutcome(claim: claim, result: .failed(reason: unconfirmed, status: nil)))
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
        for id in Set(claims.map(\.requestID)) { await logCompletion(of: id) }
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
