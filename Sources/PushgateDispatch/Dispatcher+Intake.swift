public import PushgateCore

/// The intake: requests are stored here by group commit (``GroupCommit``): those that arrive while a
/// store write is under way are stored together by the next one, in one transaction, with the progress
/// records that fell due meanwhile (``Dispatcher/recordProgress(batch:)``). While the loop has room for
/// new work, the transaction also claims the batch's first chunks and reads their first pages, and hands
/// them to the loop.
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
        let stored = await ledgerWrites.submit(known.map { .request(requests[$0]) }) { await self.writeLedger($0) }
        for (index, written) in zip(known, stored) {
            guard case .request(let answer) = written else { preconditionFailure("a request answered as a record") }
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

    /// One group commit: the requests and progress records of the batch in one store transaction,
    /// claiming with the requests if the hand-off is open. Answers each item in the batch's order.
    package func writeLedger(_ items: [LedgerItem]) async -> [LedgerAnswer] {
        var batch = LedgerWrite()
        for item in items {
            switch item {
            case .request(let request): batch.requests.append(request)
            case .progress(let record): batch.records.append(record)
            }
        }
        let (enqueued, recorded) = await write(batch)
        var (nextRequest, nextRecord) = (0, 0)
        return items.map { item in
            switch item {
            case .request:
                defer { nextRequest += 1 }
                return .request(enqueued[nextRequest])
            case .progress:
                defer { nextRecord += 1 }
                return .progress(recorded[nextRecord])
            }
        }
    }

    private func write(
        _ batch: LedgerWrite
    ) async -> (enqueued: [Result<EnqueueResult, any Error>], recorded: [Result<ProgressResult, StoreError>]) {
        guard !batch.requests.isEmpty else { return ([], await store.write(batch).recorded) }
        // Reserved under the lock a stop closes, so that a stop never releases leases before such a claim
        // has committed (it waits for the claims under way).
        let reservation = handOff.withLock { handOff in
            stopping.load(ordering: .sequentiallyConsistent) ? nil : handOff.reserve(upTo: configuration.intakeBatch)
        }
        var batch = batch
        batch.claiming = reservation.map { reservation in
            BatchClaim(
                lease: LeaseWindow(
                    owner: configuration.instanceID,
                    now: clock.now(),
                    duration: configuration.leaseDuration
                ),
                chunkSize: configuration.chunkSize,
                pageLimit: configuration.pageSize,
                maximumChunks: reservation.maximumChunks,
                newRequestsOnly: reservation.newRequestsOnly
            )
        }
        let written = await store.write(batch)
        let stored: EnqueueBatchResult
        switch written.enqueued {
        case .success(let result):
            stored = result
        case .failure(let error):
            if let reservation { endClaim(reservation, claimed: []) }
            return (Array(repeating: .failure(error), count: batch.requests.count), written.recorded)
        }
        for (request, result) in zip(batch.requests, stored.results) {
            // Stored: from here on a failure to prepare it is the dispatcher's to report, not the caller's.
            // Prepared before the claimed work is handed over, so that its start finds it cached.
            if case .success(let answer) = result, !answer.isReplay { _ = try? prepare(request) }
        }
        if let reservation {
            endClaim(reservation, claimed: stored.claimed)
        } else {
            wakeUp()
        }
        return (stored.results.map { $0.mapError { $0 } }, written.recorded)
    }

    /// Wakes the dispatch loop when work was added elsewhere (another instance, through the store's
    /// notifications), instead of waiting for its idle interval.
    public func wakeUp() {
        workAdded.store(true, ordering: .releasing)
        wake.signal()
    }

    /// A submission's claim is over (handed over, or failed): the loop claims again.
    private func endClaim(_ reservation: IntakeHandOff.Reservation, claimed: [ClaimedWork]) {
        workAdded.store(true, ordering: .releasing)
        handOff.withLock { $0.claimEnded(reservation, claimed: claimed) }
        wake.signal()
    }
}

/// What one ``Dispatcher/ledgerWrites`` group commit carries: requests submitted and progress records,
/// written together in one store transaction.
package enum LedgerItem: Sendable {
    case request(NotificationRequest)
    case progress(ProgressRecord)
}

/// The answer of a ``LedgerItem``, of the same kind.
package enum LedgerAnswer: Sendable {
    case request(Result<EnqueueResult, any Error>)
    case progress(Result<ProgressResult, StoreError>)
}
