public import Foundation

/// A device whose delivery must be tried again later (429, 5xx, a lost connection or stream).
public struct RetryEntry: Hashable, Sendable {
    public var token: DeviceToken
    /// Attempts made so far (1 after the first send failed).
    public var attempt: Int
    /// Not claimable before this.
    public var nextAttemptAt: Date
    /// Why the last attempt failed: an APNs reason string or a transport failure label.
    public var reason: String

    public init(token: DeviceToken, attempt: Int, nextAttemptAt: Date, reason: String) {
        self.token = token
        self.attempt = attempt
        self.nextAttemptAt = nextAttemptAt
        self.reason = reason
    }
}

/// A device whose delivery failed for good (a rejection, or retries given up).
public struct FailureEntry: Hashable, Sendable {
    public var token: DeviceToken
    /// An APNs reason string (`BadDeviceToken`), a transport failure label, or ``FailureEntry/expiredReason``.
    public var reason: String
    /// APNs' HTTP status, when APNs answered.
    public var status: Int?
    public var at: Date

    /// The reason recorded for retries still pending when their request expired.
    public static let expiredReason = "expired"

    public init(token: DeviceToken, reason: String, status: Int? = nil, at: Date) {
        self.token = token
        self.reason = reason
        self.status = status
        self.at = at
    }
}

/// Outcomes of a run of a chunk's targets, recorded in one transaction.
///
/// The dispatcher sends many targets concurrently; it records progress only up to a cursor before
/// which every target has an outcome, and batches many outcomes into one call.
public struct ChunkProgress: Hashable, Sendable {
    public var chunk: WorkChunk
    /// Every target of the chunk at or before this cursor has its outcome in this update or an earlier
    /// one. Progress never moves back: a smaller cursor than the recorded one is ignored.
    public var through: Int64
    /// Devices APNs accepted (200).
    public var accepted: Int
    /// The `apns-id` of the latest accepted notification, kept for the report.
    public var lastAPNsID: String?
    public var retries: [RetryEntry]
    public var failures: [FailureEntry]
    /// Devices Apple declared dead; applied to the registry (for the request's app) in the same
    /// transaction, with the same rules as ``DeviceRegistry/invalidate(app:token:reason:appleTimestamp:at:)``.
    /// Record the device's failure in `failures` as well: invalidation is not an outcome by itself.
    public var invalidations: [DeviceInvalidation]
    /// The chunk has no targets left after `through`: mark it done (progress jumps to its end).
    public var completesChunk: Bool
    /// Targets a page left out (``TargetPage/skipped``) whose cursors this record covers for the first
    /// time: after the progress recorded before, at or before `through` (every one left, with
    /// `completesChunk`). Counted on the chunk in the same transaction as the progress, so a page read
    /// again after a crash (from the recorded progress) never counts one twice.
    public var skipped: Int
    /// `accepted` by service. The stores keep its FCM and Web Push parts beside the total; the APNs part
    /// is the total less those, so a record that gives only `accepted` counts it as APNs.
    public var acceptedByService: ServiceCounts
    /// `skipped` by service, kept as ``acceptedByService`` is.
    public var skippedByService: ServiceCounts

    public init(
        chunk: WorkChunk,
        through: Int64,
        accepted: Int = 0,
        lastAPNsID: String? = nil,
        retries: [RetryEntry] = [],
        failures: [FailureEntry] = [],
        invalidations: [DeviceInvalidation] = [],
        completesChunk: Bool = false,
        skipped: Int = 0,
        acceptedByService: ServiceCounts = .zero,
        skippedByService: ServiceCounts = .zero
    ) {
        self.chunk = chunk
        self.through = through
        self.accepted = accepted
        self.lastAPNsID = lastAPNsID
        self.retries = retries
        self.failures = failures
        self.invalidations = invalidations
        self.completesChunk = completesChunk
        self.skipped = skipped
        self.acceptedByService = acceptedByService
        self.skippedByService = skippedByService
    }
}

/// What became of a ``ChunkProgress``.
public enum ProgressResult: Hashable, Sendable {
    /// Written; the lease now runs until this time.
    case recorded(leaseExpiresAt: Date)
    /// Written, and the chunk is done (its request may be done too).
    case chunkCompleted
    /// Nothing was written: the chunk was claimed by another lease (or closed because its request
    /// expired). Stop working on it; whoever holds it now resumes from the last recorded progress.
    case leaseLost
}

/// A due retry, leased to one instance.
public struct RetryClaim: Hashable, Sendable {
    public var requestID: RequestID
    public var token: DeviceToken
    /// Attempts made so far; this claim is for attempt `attempt + 1`.
    public var attempt: Int
    public var lastReason: String
    public var leaseGeneration: Int64
    public var leaseExpiresAt: Date

    public init(
        requestID: RequestID,
        token: DeviceToken,
        attempt: Int,
        lastReason: String,
        leaseGeneration: Int64,
        leaseExpiresAt: Date
    ) {
        self.requestID = requestID
        self.token = token
        self.attempt = attempt
        self.lastReason = lastReason
        self.leaseGeneration = leaseGeneration
        self.leaseExpiresAt = leaseExpiresAt
    }
}

/// What became of one claimed retry.
public struct RetryOutcome: Hashable, Sendable {
    public enum Result: Hashable, Sendable {
        /// APNs accepted it: the retry row goes, the request's accepted count grows.
        case accepted(apnsID: String?)
        /// Failed for good: the retry row goes, a failure row is written.
        case failed(reason: String, status: Int?)
        /// Failed again, temporarily: the row stays with `attempt + 1`, this due time and reason, unleased.
        case retry(nextAttemptAt: Date, reason: String)
    }

    public var claim: RetryClaim
    public var result: Result
    /// Apple declared the device dead (applied to the registry in the same transaction).
    public var invalidation: DeviceInvalidation?

    public init(claim: RetryClaim, result: Result, invalidation: DeviceInvalidation? = nil) {
        self.claim = claim
        self.result = result
        self.invalidation = invalidation
    }
}

/// What ``DeliveryLedger/recordRetryOutcomes(_:owner:now:)`` did.
public struct RetryRecordResult: Hashable, Sendable {
    /// Outcomes written.
    public var applied: Int
    /// Outcomes refused because the retry's lease had been taken by another claim (or its request
    /// expired); nothing of them was written.
    public var leaseLost: [RetryClaim]

    public init(applied: Int, leaseLost: [RetryClaim]) {
        self.applied = applied
        self.leaseLost = leaseLost
    }
}
