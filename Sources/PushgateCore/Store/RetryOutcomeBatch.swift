public import Foundation

/// Outcomes of claimed retries, recorded together by their lease holder
/// (``DeliveryLedger/recordRetryOutcomes(_:)``).
public struct RetryOutcomeBatch: Hashable, Sendable {
    public var outcomes: [RetryOutcome]
    /// The instance that claimed the retries: an outcome counts only while it still holds the lease.
    public var owner: InstanceID
    public var now: Date

    public init(_ outcomes: [RetryOutcome], owner: InstanceID, now: Date) {
        self.outcomes = outcomes
        self.owner = owner
        self.now = now
    }

    package var nowMillis: Int64 { Millis.from(now) }
}

/// What a batch of retry outcomes writes, worked out from the rows the store read (the requests and the
/// retry rows' holders), the same for every store: which outcomes lost their lease, which retry rows go
/// or are rescheduled, the accepted counts and failures per request, the invalidations, and the requests
/// to check for completion. The store reads, builds this, and writes what it lists.
package struct RetryOutcomePlan {
    /// A retry row: its request's `seq` and the device's storage key.
    package struct Key: Hashable, Sendable {
        package var seq: Int64
        package var token: String

        package init(seq: Int64, token: String) {
            self.seq = seq
            self.token = token
        }
    }

    /// A request row as read (locked) by the store.
    package typealias Request = (seq: Int64, app: String)
    /// A retry row's lease as read (locked) by the store.
    package typealias Holder = (owner: String?, generation: Int64)

    package struct Reschedule: Sendable {
        package var key: Key
        package var attempt: Int64
        package var nextAttemptAt: Int64
        package var reason: String
    }

    package struct Accepted: Sendable {
        package var count: Int64 = 0
        /// `count` by service (the stores keep its FCM and Web Push parts, ``ServiceCounts``).
        package var byService = ServiceCounts.zero
        /// The latest apns-id among the accepted outcomes that had one.
        package var apnsID: String?
    }

    package private(set) var lost: [RetryClaim] = []
    /// Retry rows to delete (accepted or failed for good).
    package private(set) var removed: [Key] = []
    package private(set) var rescheduled: [Reschedule] = []
    /// Per request `seq`, in ascending order.
    package private(set) var accepted: [(seq: Int64, Accepted)] = []
    /// Per request `seq`, in ascending order; within a request in outcome order.
    package private(set) var failures: [(seq: Int64, [FailureEntry])] = []
    package private(set) var invalidations: [(app: String, DeviceInvalidation)] = []
    /// The requests an applied outcome belongs to, ascending: check each for completion.
    package private(set) var touchedRequests: [Int64] = []
    package private(set) var applied = 0

    /// `requests` by id and `holders` by row for the batch's claims: a claim whose request or row is
    /// missing, held by another owner or generation, or already answered earlier in the batch, lost its lease.
    package init(_ batch: RetryOutcomeBatch, requests: [RequestID: Request], holders: [Key: Holder]) {
        var handled = Set<Key>()
        var accepted = [Int64: Accepted]()
        var failures = [Int64: [FailureEntry]]()
        for outcome in batch.outcomes {
            let claim = outcome.claim
            guard let request = requests[claim.requestID] else {
                lost.append(claim)
                continue
            }
            let key = Key(seq: request.seq, token: claim.token.storageKey)
            guard let holder = holders[key], holder.owner == batch.owner.value,
                holder.generation == claim.leaseGeneration, handled.insert(key).inserted
            else {
                lost.append(claim)
                continue
            }
            switch outcome.result {
            case .accepted(let apnsID):
                removed.append(key)
                accepted[request.seq, default: Accepted()].count += 1
                accepted[request.seq]?.byService[claim.token.platform] += 1
                if let apnsID { accepted[request.seq]?.apnsID = apnsID }
            case .failed(let reason, let status):
                removed.append(key)
                failures[request.seq, default: []].append(
                    FailureEntry(token: claim.token, reason: reason, status: status, at: batch.now)
                )
            case .retry(let nextAttemptAt, let reason):
                rescheduled.append(
                    Reschedule(
                        key: key,
                        attempt: Int64(claim.attempt + 1),
                        nextAttemptAt: Millis.from(nextAttemptAt),
                        reason: reason
                    )
                )
            }
            if let invalidation = outcome.invalidation { invalidations.append((request.app, invalidation)) }
        }
        self.accepted = accepted.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        self.failures = failures.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        touchedRequests = Set(handled.map(\.seq)).sorted()
        applied = handled.count
    }

    package var result: RetryRecordResult { RetryRecordResult(applied: applied, leaseLost: lost) }
}
