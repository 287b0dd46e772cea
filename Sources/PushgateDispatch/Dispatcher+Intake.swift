public import PushgateCore

/// The intake: requests are stored here by group commit (``GroupCommit``): those that arrive while a
/// store write is under way are stored together by the next one, in one transaction. While the loop has
/// room for new work, the transaction also claims the batch's first chunks and reads their first pages,
/// and hands them to the loop.
extension Dispatcher {
    /// Stores the request durably (with whatever other requests arrived meanwhile), then wakes the
    /// dispatch loop. Answers only after the commit that holds the request; a refusal of this request
    /// (unknown group, duplicate id, reused idempotency key) is its own and does not touch the others.
    public func submit(_ request: NotificationRequest) async throws -> EnqueueResult {
        try await submit(batch: [request])[0].get()
    }

    /// ``submit(_:)`` for requests that arrived together: they join the next group commit as one.
    public func submit(batch requests: [NotificationRequest]) async -> [Result<EnqueueResult, any Error>] {
        var answers = [Result<EnqueueResult, any Error>?](repeating: nil, count: requests.count)
        var known: [Int] = []
        for (index, request) in requests.enumerated() {
            if routes[request.app] != nil {
                known.append(index)
            } else {
                answers[index] = .failure(
                    StoreError(code: StoreError.Code("unknown_app"), message: "unknown app \"\(request.app)\"")
                )
            }
        }
        let stored = await intake.submit(known.map { requests[$0] }) { batch in await self.storeBatch(batch) }
        for (index, answer) in zip(known, stored) {
            answers[index] = answer
            guard case .success(let result) = answer else { continue }
            let request = requests[index]
            if result.isReplay {
                // A retry of a stored request (same idempotency key and body): nothing new to send or count.
                // The store claimed nothing with it; the loop claims whatever waits as usual.
                logger.debug(
                    "notification request is a retry of a stored one",
                    metadata: ["push.request_id": "\(result.id)", "push.app": "\(request.app)"]
                )
            } else {
                metrics.requestAccepted(app: request.app, targets: result.targetCount)
                logger.debug(
                    "notification request queued",
                    metadata: [
                        "push.request_id": "\(result.id)", "push.targets": "\(result.targetCount)",
                        "push.app": "\(request.app)",
                    ]
                )
            }
        }
        return answers.map { $0! }
    }

    /// One group commit: the batch in one store transaction, claiming with it if the hand-off is open.
    private func storeBatch(_ batch: [NotificationRequest]) async -> [Result<EnqueueResult, any Error>] {
        // Counted before the hand-off is taken, so that the loop never sees it open while a claim is under
        // way, and a stop never releases leases before such a claim has committed.
        claimsInFlight.wrappingAdd(1, ordering: .sequentiallyConsistent)
        let claiming =
            !stopping.load(ordering: .sequentiallyConsistent)
            && handOffOpen.compareExchange(expected: true, desired: false, ordering: .sequentiallyConsistent).exchanged
        if !claiming { claimsInFlight.wrappingSubtract(1, ordering: .sequentiallyConsistent) }
        let claim =
            claiming
            ? BatchClaim(
                lease: LeaseWindow(
                    owner: configuration.instanceID,
                    now: clock.now(),
                    duration: configuration.leaseDuration
                ),
                chunkSize: configuration.chunkSize,
                pageLimit: configuration.pageSize,
                maximumChunks: configuration.intakeBatch,
                newRequestsOnly: handOffNewRequestsOnly.load(ordering: .sequentiallyConsistent)
            ) : nil
        let stored: EnqueueBatchResult
        do {
            stored = try await store.enqueue(batch: batch, claiming: claim)
        } catch {
            if claiming { endClaim() }
            return Array(repeating: .failure(error), count: batch.count)
        }
        for (request, result) in zip(batch, stored.results) {
            // Stored: from here on a failure to prepare it is the dispatcher's to report, not the caller's.
            // Prepared before the claimed work is handed over, so that its start finds it cached.
            if case .success(let answer) = result, !answer.isReplay { _ = try? prepare(request) }
        }
        if !stored.claimed.isEmpty { handedWork.withLock { $0.append(contentsOf: stored.claimed) } }
        if claiming {
            endClaim()
        } else {
            wakeUp()
        }
        return stored.results.map { $0.mapError { $0 } }
    }

    /// Wakes the dispatch loop when work was added elsewhere (another instance, through the store's
    /// notifications), instead of waiting for its idle interval.
    public func wakeUp() {
        workAdded.store(true, ordering: .releasing)
        wake.signal()
    }

    /// A submission's claim is over (handed over, or failed): the loop claims again.
    private func endClaim() {
        workAdded.store(true, ordering: .releasing)
        claimsInFlight.wrappingSubtract(1, ordering: .sequentiallyConsistent)
        wake.signal()
    }
}
