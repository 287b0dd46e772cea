public import Foundation

/// The ledger's and the registry's requirements said with labelled fields, as the dispatcher and the
/// tests call them: each builds the one value its requirement takes.
extension DeliveryLedger {
    public func claimChunk(
        owner: InstanceID,
        now: Date,
        leaseDuration: Duration,
        chunkSize: Int
    ) async throws
        -> WorkChunk?
    {
        try await claimChunk(LeaseWindow(owner: owner, now: now, duration: leaseDuration), chunkSize: chunkSize)
    }

    public func recordProgress(
        _ progress: ChunkProgress,
        owner: InstanceID,
        now: Date,
        leaseDuration: Duration
    )
        async throws -> ProgressResult
    {
        try await recordProgress(progress, renewing: LeaseWindow(owner: owner, now: now, duration: leaseDuration))
    }

    public func claimRetries(
        owner: InstanceID,
        now: Date,
        leaseDuration: Duration,
        limit: Int
    ) async throws
        -> [RetryClaim]
    {
        try await claimRetries(LeaseWindow(owner: owner, now: now, duration: leaseDuration), limit: limit)
    }

    public func recordRetryOutcomes(
        _ outcomes: [RetryOutcome],
        owner: InstanceID,
        now: Date
    ) async throws
        -> RetryRecordResult
    {
        try await recordRetryOutcomes(RetryOutcomeBatch(outcomes, owner: owner, now: now))
    }
}

extension DeviceRegistry {
    public func invalidate(
        app: String,
        token: DeviceToken,
        reason: APNsReason,
        appleTimestamp: Date?,
        at: Date
    )
        async throws -> InvalidationResult
    {
        try await invalidate(
            app: app,
            DeviceInvalidation(token: token, reason: reason, appleTimestamp: appleTimestamp),
            at: at
        )
    }
}
