public import PushgateCore

/// The intake: requests are stored here, and while the loop has nothing under way, a request's first
/// chunk is claimed and paged in the same store transaction and handed to the loop.
extension Dispatcher {
    /// Stores the request durably, then wakes the dispatch loop.
    public func submit(_ request: NotificationRequest) async throws -> EnqueueResult {
        guard routes[request.app] != nil else {
            throw StoreError(code: StoreError.Code("unknown_app"), message: "unknown app \"\(request.app)\"")
        }
        // Counted before the hand-off is taken, so that the loop never sees it open while a claim is under
        // way, and a stop never releases leases before such a claim has committed.
        claimsInFlight.wrappingAdd(1, ordering: .sequentiallyConsistent)
        let claiming =
            !stopping.load(ordering: .sequentiallyConsistent)
            && handOffOpen.compareExchange(expected: true, desired: false, ordering: .sequentiallyConsistent).exchanged
        if !claiming { claimsInFlight.wrappingSubtract(1, ordering: .sequentiallyConsistent) }
        var claimed: ClaimedWork? = nil
        let result: EnqueueResult
        do {
            if claiming {
                let lease = LeaseWindow(
                    owner: configuration.instanceID,
                    now: clock.now(),
                    duration: configuration.leaseDuration
                )
                (result, claimed) = try await store.enqueue(
                    request,
                    claiming: lease,
                    chunkSize: configuration.chunkSize,
                    pageLimit: configuration.pageSize
                )
            } else {
                result = try await store.enqueue(request)
            }
        } catch {
            if claiming { endClaim() }
            throw error
        }
        if result.isReplay {
            // A retry of a stored request (same idempotency key and body): nothing new to send or count.
            // The store claimed nothing with it; the loop claims whatever waits as usual.
            logger.debug(
                "notification request is a retry of a stored one",
                metadata: ["push.request_id": "\(result.id)", "push.app": "\(request.app)"]
            )
        } else {
            // Stored: from here on a failure to prepare it is the dispatcher's to report, not the caller's.
            // Prepared before the claimed work is handed over, so that its start finds it cached.
            _ = try? prepare(request)
            if let claimed { handedWork.withLock { $0.append(claimed) } }
            metrics.requestAccepted(app: request.app, targets: result.targetCount)
            logger.debug(
                "notification request queued",
                metadata: [
                    "push.request_id": "\(result.id)", "push.targets": "\(result.targetCount)",
                    "push.app": "\(request.app)",
                ]
            )
        }
        if claiming {
            endClaim()
        } else {
            wakeUp()
        }
        return result
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
