public import Foundation

/// The device registry: devices per app, groups per app, and which devices are in which groups.
///
/// Every method is one transaction. Implementations are `Sendable` and safe to call from many tasks.
public protocol DeviceRegistry: Sendable {
    /// Adds the device to the group, creating the device and the group as needed. Idempotent: doing it
    /// twice leaves one device and one membership. A device that was invalid becomes valid again with a
    /// new `registeredAt`. Every call moves the device's `lastRegisteredAt` forward (never back).
    func register(_ registration: Registration) async throws -> RegistrationResult

    /// ``register(_:)`` for many registrations in one transaction (the UDP ingress applies bursts with
    /// it), with one result per registration, in order. A registration repeated within the batch reports
    /// what it changed at its own position (`created`, then `alreadyMember`).
    func register(batch: [Registration]) async throws -> [RegistrationResult]

    /// Takes the device out of one group. Returns false if it was not a member (or is unknown).
    /// The device itself stays registered, even with no group left.
    func unassign(app: String, token: DeviceToken, group: String) async throws -> Bool

    /// Removes the device from the app: its memberships go with it. Returns false if it was unknown.
    func removeDevice(app: String, token: DeviceToken) async throws -> Bool

    /// Looks up a device.
    func device(app: String, token: DeviceToken) async throws -> DeviceRecord?

    /// Lists a group's devices, valid and invalid, `limit` at a time in a stable order (see ``GroupCursor``).
    /// Throws ``StoreError/Code/unknownGroup`` if the app has no such group.
    func devices(app: String, group: String, after: GroupCursor?, limit: Int) async throws -> GroupPage

    /// Marks a device invalid because its push service said its token is dead (APNs, or FCM's
    /// `UNREGISTERED`: the device of `token`'s platform only), so that fan-out skips it.
    ///
    /// With an `appleTimestamp` (410), the device stays valid if it was registered again after that
    /// time (``DeviceRecord/lastRegisteredAt`` later than the timestamp): the app re-registered the
    /// token after Apple last saw it die. Without one (`BadDeviceToken`), it is invalidated.
    ///
    /// ``invalidate(app:token:reason:appleTimestamp:at:)`` says it with the invalidation's fields.
    func invalidate(app: String, _ invalidation: DeviceInvalidation, at: Date) async throws -> InvalidationResult
}

/// The durable delivery ledger: notification requests, the leased work chunks that fan them out, the
/// retries still due, and the outcomes that make up each request's delivery report.
///
/// ## How a dispatcher uses it
///
/// Every claim and renewal takes a ``LeaseWindow`` (owner, now, duration); the forms with those as
/// labels (``claimChunk(owner:now:leaseDuration:chunkSize:)`` and so on) say the same.
///
/// At start-up: ``releaseLeases(owner:now:)`` with the instance's own id, so that what a previous run of
/// this instance held (it was killed) is claimable at once instead of after its leases expire.
///
/// Fan-out loop, for as long as there is work:
/// 1. ``claimChunk(owner:now:leaseDuration:chunkSize:)``. It first takes over an unfinished chunk
///    whose lease expired (an instance died), else cuts the next chunk of the oldest unfinished request,
///    advancing that request's cut cursor. Nil: no fan-out work right now (wait for new requests, or for
///    the earliest lease expiry).
/// 2. Load the request once per id with ``request(_:)`` (cache it: it is immutable).
/// 3. Page through the chunk: ``targets(of:after:limit:)`` from `chunk.progress`, then from each page's
///    `scannedThrough`, until a page has `isEnd`.
/// 4. Send; as outcomes arrive, batch them into ``recordProgress(_:owner:now:leaseDuration:)`` calls:
///    `through` = the highest cursor before which every target has an outcome. Each call is one
///    transaction and renews the lease; call it at least every `leaseDuration / 3`. The last call of a
///    chunk passes `completesChunk`. On ``ProgressResult/leaseLost`` drop the chunk: its outcomes
///    were not written and another holder resumes from the recorded progress.
///
/// Retry loop: ``claimRetries(owner:now:leaseDuration:limit:)`` (rows with `nextAttemptAt <= now`),
/// send, ``recordRetryOutcomes(_:owner:now:)``; sleep until ``nextWakeUp(after:)``.
/// Housekeeping: ``expireOverdue(now:)`` now and then (``claimChunk(_:chunkSize:)`` runs it too;
/// ``claimChunks(_:)`` only leaves overdue requests out).
///
/// ## Guarantees
/// - A request is stored in one transaction before ``enqueue(_:)`` returns: once acknowledged it is not
///   lost by a crash. A group the app does not have targets nothing and is listed in the report; a
///   request whose groups are all unknown and that names no device is rejected and writes nothing.
/// - A target device is sent to once per request, even when it is in several target groups and listed
///   directly, except within the in-flight window of a chunk taken over after its holder died.
/// - Progress, outcomes, retries and invalidations of one batch are written together or not at all.
/// - A request is `done` when its targets are all cut, all its chunks are done and no retry is pending;
///   `expired` when its expiration (``NotificationRequest/expiresAt``) passed before that.
/// - Nothing is loaded or written per device of a group before sending: chunks are ranges of device ids,
///   read in pages; only devices that need a retry or failed get a row.
///
/// Targets are read when the chunk is paged, not when the request is stored: a device invalidated or
/// removed from a group meanwhile is skipped, and counted as such (``TargetPage/skipped``, recorded with
/// ``ChunkProgress/skipped``, reported as ``DeliveryReport/skipped``), so that a finished request has
/// `targets = accepted + failed + skipped`. Devices created after the request was stored are not
/// targets (the request keeps the highest device id of that moment as its bound).
///
/// ## Leases
/// A chunk or retry row carries `owner`, `lease_expires_at` and a `generation` that every claim
/// increments. A write is accepted only from the holder of the current generation; a lease that ran
/// out is still honoured until someone else claims the row (then the generation moves on and the old
/// holder's next write is refused). So after a crash at most the outcomes of one unrecorded batch per
/// chunk are sent twice, and nothing recorded is sent again.
///
/// ## Implementing this on PostgreSQL (several instances)
/// The same tables work; what changes is how claims avoid each other:
/// - takeover: `SELECT … FROM chunk WHERE state = open AND lease_expires_at <= $now ORDER BY request, id
///   LIMIT 1 FOR UPDATE SKIP LOCKED`, then the `UPDATE … generation = generation + 1` in the same transaction;
/// - cutting: lock the oldest request with uncut targets (`FOR UPDATE`, so that instances cutting the same
///   broadcast take turns for the few milliseconds a cut takes, or `SKIP LOCKED` to move on to the next
///   request), read the next `chunkSize` member ids (the same per-group range scans as SQLite), advance
///   the cut cursor, insert the chunk, commit;
/// - retries: `… WHERE next_attempt_at <= $now AND lease_expires_at <= $now ORDER BY next_attempt_at
///   LIMIT $n FOR UPDATE SKIP LOCKED`;
/// - progress: `SELECT … FROM chunk WHERE id = $1 FOR UPDATE`, compare owner and generation, write;
/// - counts: a hot `request.accepted` row is updated by every instance's progress; if that contends,
///   keep the counters per chunk and sum them in the report;
/// - `NOTIFY` after an enqueue and after a retry is rescheduled, so idle instances wake up without polling
///   (``nextWakeUp(after:)`` bounds the sleep otherwise);
/// - device ids from a sequence: a bound taken at enqueue still excludes later devices (a sequence value
///   may commit late, which at worst leaves out a device registered concurrently with the request).
public protocol DeliveryLedger: Sendable {
    /// Stores a request durably in one transaction. Groups the app does not have are stored as its
    /// ``DeliveryReport/unknownGroups`` (see ``TargetGroups/resolve(app:groups:known:hasDevices:)``).
    /// Throws ``StoreError/Code/unknownGroup`` (nothing written) if every group is unknown and it names
    /// no device, ``StoreError/Code/noTargets`` if it names no group and no device,
    /// ``StoreError/Code/duplicateRequestID`` if the id is taken.
    /// A request with no target is stored as `done` at once.
    func enqueue(_ request: NotificationRequest) async throws -> EnqueueResult

    /// ``enqueue(_:)`` and, in the same transaction, ``claimChunk(_:chunkSize:)`` and the claimed chunk's
    /// first page (``targets(of:after:limit:)`` after its progress, at most `pageLimit`). For a dispatcher
    /// with nothing under way: the request reaches its first send after one store transaction instead of
    /// three, each behind two thread hand-offs. The claim is exactly ``claimChunk(_:chunkSize:)``'s (the
    /// oldest claimable work: this request's first chunk unless older work waits), so order between
    /// requests is kept. A store may claim nothing (the default implementation stores the request and
    /// answers nil); the work is then claimed the usual way. Throws as ``enqueue(_:)``, writing nothing.
    func enqueue(
        _ request: NotificationRequest,
        claiming lease: LeaseWindow,
        chunkSize: Int,
        pageLimit: Int
    ) async throws -> (stored: EnqueueResult, claimed: ClaimedWork?)

    /// Group commit: stores many requests in one transaction (one fsync), each as ``enqueue(_:)`` would,
    /// and with them claims up to `claiming.maximumChunks` chunks (as ``claimChunks(_:)`` does where the
    /// store can in the same transaction, so the scheduler decides which) and reads each one's first page. A request's own refusal
    /// (unknown groups, no targets, a duplicate id, a reused idempotency key) is its answer in
    /// ``EnqueueBatchResult/results`` and writes nothing of it; the others are stored. A replay answers
    /// the earlier request, and so does a second request of the batch with the first one's key. Throws
    /// only when the transaction fails: then nothing of the batch is stored. The default implementation
    /// stores each request in a transaction of its own and claims with the first.
    func enqueue(batch requests: [NotificationRequest], claiming: BatchClaim?) async throws -> EnqueueBatchResult

    /// Group commit of progress: the records of many chunks in one transaction, each with its own lease
    /// check (``recordProgress(_:renewing:)``), answered in order. A store failure fails every record of
    /// the batch (none is written); the default implementation writes each in a transaction of its own.
    func recordProgress(batch records: [ProgressRecord]) async -> [Result<ProgressResult, StoreError>]

    /// Group commit of the intake and the progress together: ``recordProgress(batch:)`` of `records`,
    /// then ``enqueue(batch:claiming:)`` of `requests`, each answered exactly as by those two calls, in one
    /// transaction and one fsync where the store can (SQLite). A failure of that transaction fails both
    /// halves and writes nothing. The default implementation makes the two calls, one after the other.
    func write(_ batch: LedgerWrite) async -> LedgerWriteResult

    /// The stored request (nil if unknown).
    func request(_ id: RequestID) async throws -> NotificationRequest?

    /// Claims work: first an unfinished chunk whose lease expired (taken over, `isTakeover`), else a new
    /// chunk of at most `chunkSize` targets cut from the oldest request with uncut targets. The chunk is
    /// leased to `lease.owner` until `lease.expiresAt`. Nil when there is nothing to claim.
    func claimChunk(_ lease: LeaseWindow, chunkSize: Int) async throws -> WorkChunk?

    /// Claims up to `claim.maximumChunks` chunks in one transaction (``ChunkBatchClaim``): expired leases
    /// taken over first, then the chunks of the requests ``ClaimScheduler`` picks, the candidates read once;
    /// each with its first page (at most `claim.pageLimit` targets). The claim ends after a chunk that may
    /// not fit one page (a broadcast's). It takes nothing of a request overdue at `claim.lease.now`, and
    /// does not expire them (``expireOverdue(now:)`` does). Empty when there is nothing to claim. With
    /// several instances, no two claim the same chunk. A failure claims nothing (the transaction is
    /// rolled back).
    func claimChunks(_ claim: BatchClaim) async throws -> [ClaimedWork]

    /// The chunk's distinct valid targets after `cursor`, in cursor order, and apart (``TargetPage/skipped``)
    /// those the request counted that were invalidated or removed since it was stored; at most `limit`
    /// targets and skipped ones read from the range together (removed ones do not count towards it).
    func targets(of chunk: WorkChunk, after cursor: Int64, limit: Int) async throws -> TargetPage

    /// Records a batch of outcomes of a chunk, its progress and invalidations in one transaction and
    /// renews the lease, if `lease.owner` still holds the chunk's lease (same generation; a lease that expired
    /// but was not taken over still counts). Otherwise writes nothing and answers `.leaseLost`.
    func recordProgress(_ progress: ChunkProgress, renewing lease: LeaseWindow) async throws -> ProgressResult

    /// Claims up to `limit` retries that are due (`nextAttemptAt <= now`) and not leased (or whose lease
    /// expired), earliest first, leasing them to `lease.owner` until `lease.expiresAt`.
    func claimRetries(_ lease: LeaseWindow, limit: Int) async throws -> [RetryClaim]

    /// Records outcomes of claimed retries in one transaction. An outcome whose lease is no longer held
    /// (same owner and generation) is refused and listed in the result.
    func recordRetryOutcomes(_ batch: RetryOutcomeBatch) async throws -> RetryRecordResult

    /// Ends every lease `owner` holds (chunks and retries), making them claimable at once, by anyone.
    /// For a restart with the same instance id, and for a graceful shutdown. Returns how many were released.
    @discardableResult
    func releaseLeases(owner: InstanceID, now: Date) async throws -> Int

    /// Expires every unfinished request whose expiration is before `now`: pending retries become failures
    /// with reason "expired", targets not sent yet are counted as failed "expired", its chunks are closed
    /// (their holders' progress is refused from then on). Returns the ids expired.
    @discardableResult
    func expireOverdue(now: Date) async throws -> [RequestID]

    /// The earliest moment at which work may become claimable without a new request: the next retry due,
    /// the next lease to end, or the next expiration of an unfinished request. It may be at or before `now`
    /// (work is due already). Nil when nothing is pending. A dispatcher sleeps until then or until woken.
    func nextWakeUp(after now: Date) async throws -> Date?

    /// The delivery report (nil if unknown).
    func report(_ id: RequestID) async throws -> DeliveryReport?

    /// The reports of those known, in the order asked: for the dispatcher's "request done" lines, which
    /// come many at once under one-device traffic. The default implementation reads one at a time.
    func reports(_ ids: [RequestID]) async throws -> [DeliveryReport]

    /// The devices of a request that failed for good, `limit` at a time after `after`, in the order of
    /// their ``DeviceToken/storageKey`` in byte order (APNs hex and `fcm:`-prefixed FCM tokens as one text
    /// order, whatever the database's collation: stable for paging, but not ``DeviceToken``'s platform-first `<`).
    func failures(of id: RequestID, after: DeviceToken?, limit: Int) async throws -> [FailureEntry]
}

extension DeliveryLedger {
    public func reports(_ ids: [RequestID]) async throws -> [DeliveryReport] {
        var reports: [DeliveryReport] = []
        for id in ids { if let report = try await report(id) { reports.append(report) } }
        return reports
    }

    public func enqueue(
        _ request: NotificationRequest,
        claiming lease: LeaseWindow,
        chunkSize: Int,
        pageLimit: Int
    ) async throws -> (stored: EnqueueResult, claimed: ClaimedWork?) {
        (try await enqueue(request), nil)
    }
}

/// A chunk claimed in the transaction that stored a request, with its first page already read.
public struct ClaimedWork: Hashable, Sendable {
    public var chunk: WorkChunk
    public var firstPage: TargetPage

    public init(chunk: WorkChunk, firstPage: TargetPage) {
        self.chunk = chunk
        self.firstPage = firstPage
    }
}

/// A store: registry and ledger in one database, so that fan-out reads the registry that registrations
/// write, and invalidations commit with the outcomes that caused them.
public protocol PushStore: DeviceRegistry, DeliveryLedger {}
