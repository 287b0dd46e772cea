import Foundation
import PushgateCore
import PushgateDispatch
import Synchronization

/// A `PushStore` that forwards to a real store and fails the k-th call of one chosen method (once),
/// counting every method's calls, so that a test can fail each call of a scenario in turn.
final class FaultInjectingStore: PushStore {
    struct Fault: Sendable {
        var operation: StoreOperation
        /// 1-based: the call that fails.
        var call: Int
    }

    struct InjectedFailure: Error, CustomStringConvertible {
        var operation: StoreOperation
        var description: String { "injected failure of \(operation.rawValue)" }
    }

    private struct State {
        var calls: [StoreOperation: Int] = [:]
        var fault: Fault?
        var failed = false
        /// Every call of `operation` fails while set (an outage).
        var down: Set<StoreOperation> = []
        /// Every write of the intake and the registry fails while set, as SQLite's on a full disk.
        var diskFull = false
        var intakeFailures = 0
        var chunksClaimed = 0
        var chunksClaimedWithEnqueue = 0
    }
    private let base: any PushStore
    private let state: Mutex<State>
    /// `request(_:)` calls waiting while held (``holdRequests()``).
    private let held = Mutex<(on: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    init(base: any PushStore, fault: Fault? = nil) {
        self.base = base
        self.state = Mutex(State(fault: fault))
    }

    /// How often each method was called.
    var calls: [StoreOperation: Int] { state.withLock { $0.calls } }
    /// Claims that returned a chunk (with an enqueue too).
    var chunksClaimed: Int { state.withLock { $0.chunksClaimed } }
    /// Chunks claimed by an enqueue (``DeliveryLedger/enqueue(_:claiming:chunkSize:pageLimit:)``).
    var chunksClaimedWithEnqueue: Int { state.withLock { $0.chunksClaimedWithEnqueue } }
    /// Whether the chosen fault happened.
    var injected: Bool { state.withLock { $0.failed } }

    func setDown(_ operations: Set<StoreOperation>) { state.withLock { $0.down = operations } }

    /// From now until ``releaseRequests()``, `request(_:)` does not answer, as on a database that went silent.
    func holdRequests() { held.withLock { $0.on = true } }

    func releaseRequests() {
        let waiting = held.withLock { held in
            held.on = false
            defer { held.waiting = [] }
            return held.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    /// While `full`, `enqueue` and `register` fail with the error SQLite gives on a full disk.
    func setDiskFull(_ full: Bool) { state.withLock { $0.diskFull = full } }
    /// Intake and registry writes refused because of ``setDiskFull(_:)``.
    var intakeFailures: Int { state.withLock { $0.intakeFailures } }

    private func write<T>(_ body: () async throws -> T) async throws -> T {
        let full = state.withLock { state in
            if state.diskFull { state.intakeFailures += 1 }
            return state.diskFull
        }
        if full { throw StoreError.backend("database or disk is full") }
        return try await body()
    }

    private func call<T>(_ operation: StoreOperation, _ body: () async throws -> T) async throws -> T {
        let fails = state.withLock { state -> Bool in
            state.calls[operation, default: 0] += 1
            if state.down.contains(operation) { return true }
            guard let fault = state.fault, fault.operation == operation, fault.call == state.calls[operation] else {
                return false
            }
            state.failed = true
            return true
        }
        if fails { throw InjectedFailure(operation: operation) }
        return try await body()
    }

    // MARK: Ledger (the dispatcher's methods go through `call`)

    func enqueue(_ request: NotificationRequest) async throws -> EnqueueResult {
        try await write { try await base.enqueue(request) }
    }

    func enqueue(
        _ request: NotificationRequest,
        claiming lease: LeaseWindow,
        chunkSize: Int,
        pageLimit: Int
    ) async throws -> (stored: EnqueueResult, claimed: ClaimedWork?) {
        let answer = try await write {
            try await base.enqueue(request, claiming: lease, chunkSize: chunkSize, pageLimit: pageLimit)
        }
        if answer.claimed != nil {
            state.withLock {
                $0.chunksClaimed += 1
                $0.chunksClaimedWithEnqueue += 1
            }
        }
        return answer
    }

    func request(_ id: RequestID) async throws -> NotificationRequest? {
        await withCheckedContinuation { continuation in
            let wait = held.withLock { held in
                if held.on { held.waiting.append(continuation) }
                return held.on
            }
            if !wait { continuation.resume() }
        }
        return try await call(.readRequest) { try await base.request(id) }
    }

    func claimChunk(_ lease: LeaseWindow, chunkSize: Int) async throws -> WorkChunk? {
        let chunk = try await call(.claimChunk) { try await base.claimChunk(lease, chunkSize: chunkSize) }
        if chunk != nil { state.withLock { $0.chunksClaimed += 1 } }
        return chunk
    }

    func claimChunks(_ claim: BatchClaim) async throws -> [ClaimedWork] {
        let claimed = try await call(.claimChunk) { try await base.claimChunks(claim) }
        state.withLock { $0.chunksClaimed += claimed.count }
        return claimed
    }

    func targets(of chunk: WorkChunk, after cursor: Int64, limit: Int) async throws -> TargetPage {
        try await call(.readTargets) { try await base.targets(of: chunk, after: cursor, limit: limit) }
    }

    func recordProgress(_ progress: ChunkProgress, renewing lease: LeaseWindow) async throws -> ProgressResult {
        try await call(.recordProgress) { try await base.recordProgress(progress, renewing: lease) }
    }

    func claimRetries(_ lease: LeaseWindow, limit: Int) async throws -> [RetryClaim] {
        try await call(.claimRetries) { try await base.claimRetries(lease, limit: limit) }
    }

    func recordRetryOutcomes(_ batch: RetryOutcomeBatch) async throws -> RetryRecordResult {
        try await call(.recordRetryOutcomes) { try await base.recordRetryOutcomes(batch) }
    }

    func releaseLeases(owner: InstanceID, now: Date) async throws -> Int {
        try await call(.releaseLeases) { try await base.releaseLeases(owner: owner, now: now) }
    }

    func expireOverdue(now: Date) async throws -> [RequestID] {
        try await call(.expireOverdue) { try await base.expireOverdue(now: now) }
    }

    func nextWakeUp(after now: Date) async throws -> Date? {
        try await call(.nextWakeUp) { try await base.nextWakeUp(after: now) }
    }

    func report(_ id: RequestID) async throws -> DeliveryReport? { try await base.report(id) }

    func failures(of id: RequestID, after: DeviceToken?, limit: Int) async throws -> [FailureEntry] {
        try await base.failures(of: id, after: after, limit: limit)
    }

    // MARK: Registry (forwarded)

    func register(_ registration: Registration) async throws -> RegistrationResult {
        try await write { try await base.register(registration) }
    }

    func register(batch: [Registration]) async throws -> [RegistrationResult] {
        try await write { try await base.register(batch: batch) }
    }

    func unassign(app: String, token: DeviceToken, group: String) async throws -> Bool {
        try await base.unassign(app: app, token: token, group: group)
    }

    func removeDevice(app: String, token: DeviceToken) async throws -> Bool {
        try await base.removeDevice(app: app, token: token)
    }

    func device(app: String, token: DeviceToken) async throws -> DeviceRecord? {
        try await base.device(app: app, token: token)
    }

    func devices(app: String, group: String, after: GroupCursor?, limit: Int) async throws -> GroupPage {
        try await base.devices(app: app, group: group, after: after, limit: limit)
    }

    func invalidate(app: String, _ invalidation: DeviceInvalidation, at: Date) async throws -> InvalidationResult {
        try await base.invalidate(app: app, invalidation, at: at)
    }
}
