import Foundation
import Logging
import PushgateCore
import PushgateUDP
import Synchronization

/// An in-memory registry: memberships per app, the size of each batch it was given, and an optional
/// gate that holds every write until opened (to keep the writer busy in back-pressure tests).
final class FakeRegistry: DeviceRegistry {
    struct Membership: Hashable, Sendable {
        var app: String
        var token: DeviceToken
        var group: String
    }

    private struct State {
        var memberships = Set<Membership>()
        var devices: [String: Date] = [:]  // "app/token" -> last registered
        var batchSizes: [Int] = []
        var failingTokens = Set<DeviceToken>()
        var outage = false
        var failingAttempts: ClosedRange<Int>? = nil
        var attempts = 0
        var attemptWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())
    let gate: Gate?

    init(gate: Gate? = nil) {
        self.gate = gate
    }

    var memberships: Set<Membership> { state.withLock { $0.memberships } }
    var batchSizes: [Int] { state.withLock { $0.batchSizes } }

    /// Registrations of this token throw a backend error (and so does any batch that contains it).
    func failRegistrations(of token: DeviceToken) {
        state.withLock { _ = $0.failingTokens.insert(token) }
    }

    func register(_ registration: Registration) async throws -> RegistrationResult {
        try await register(batch: [registration])[0]
    }

    /// While the outage lasts, every registration write throws a backend error.
    func beginOutage() { state.withLock { $0.outage = true } }
    func endOutage() { state.withLock { $0.outage = false } }
    /// An outage by attempt number (counted from 1 over every `register(batch:)` call): the calls numbered
    /// in `attempts` throw a backend error, those before and after it go through.
    func failAttempts(_ attempts: ClosedRange<Int>) { state.withLock { $0.failingAttempts = attempts } }
    /// Calls of `register(batch:)`, failed or not.
    var attempts: Int { state.withLock { $0.attempts } }

    /// Returns once `register(batch:)` has been called `count` times in all.
    func waitForAttempts(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                if state.attempts >= count { return true }
                state.attemptWaiters.append((count, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    func register(batch: [Registration]) async throws -> [RegistrationResult] {
        await gate?.wait()
        let (ready, result) = state.withLock {
            state -> ([CheckedContinuation<Void, Never>], Result<[RegistrationResult], StoreError>) in
            state.attempts += 1
            let attempts = state.attempts
            let ready = state.attemptWaiters.filter { $0.count <= attempts }.map(\.continuation)
            state.attemptWaiters.removeAll { $0.count <= attempts }
            return (ready, Result { () throws(StoreError) in try Self.apply(batch, to: &state) })
        }
        for continuation in ready { continuation.resume() }
        return try result.get()
    }

    private static func apply(_ batch: [Registration], to state: inout State) throws(StoreError) -> [RegistrationResult]
    {
        if state.outage || state.failingAttempts?.contains(state.attempts) == true {
            throw StoreError.backend("the store is out")
        }
        if batch.contains(where: { state.failingTokens.contains($0.token) }) {
            throw StoreError.backend("disk on fire")
        }
        state.batchSizes.append(batch.count)
        return batch.map { registration in
            let key = "\(registration.app)/\(registration.token.hex)"
            let known = state.devices.updateValue(registration.at, forKey: key) != nil
            let joined = state.memberships.insert(
                Membership(app: registration.app, token: registration.token, group: registration.group)
            ).inserted
            return !known ? .created : joined ? .joinedGroup : .alreadyMember
        }
    }

    func unassign(app: String, token: DeviceToken, group: String) async throws -> Bool {
        await gate?.wait()
        return state.withLock { $0.memberships.remove(Membership(app: app, token: token, group: group)) != nil }
    }

    func removeDevice(app: String, token: DeviceToken) async throws -> Bool {
        state.withLock { state in
            state.memberships = state.memberships.filter { !($0.app == app && $0.token == token) }
            return state.devices.removeValue(forKey: "\(app)/\(token.hex)") != nil
        }
    }

    func device(app: String, token: DeviceToken) async throws -> DeviceRecord? {
        state.withLock { state in
            guard let at = state.devices["\(app)/\(token.hex)"] else { return nil }
            let groups = state.memberships.filter { $0.app == app && $0.token == token }.map(\.group).sorted()
            return DeviceRecord(
                app: app,
                token: token,
                state: .valid,
                groups: groups,
                registeredAt: at,
                lastRegisteredAt: at
            )
        }
    }

    func devices(app: String, group: String, after: GroupCursor?, limit: Int) async throws -> GroupPage {
        throw StoreError.invalidArgument("not used by the UDP ingress")
    }

    func invalidate(app: String, _ invalidation: DeviceInvalidation, at: Date) async throws -> InvalidationResult {
        .unknownDevice
    }
}

/// An in-memory intake that knows some groups (of any app) and records what it stored.
final class FakeIntake: NotificationIntake {
    private let knownGroups: Set<String>
    private let stored = Mutex<[NotificationRequest]>([])
    private let failures = Mutex<(next: [StoreError], attempts: Int)>(([], 0))

    init(knownGroups: Set<String>) {
        self.knownGroups = knownGroups
    }

    var requests: [NotificationRequest] { stored.withLock { $0 } }
    /// Every call of `submit`, failed ones included.
    var attempts: Int { failures.withLock { $0.attempts } }

    /// The next calls of `submit` throw these, one each, before anything else is checked.
    func failNext(_ errors: [StoreError]) {
        failures.withLock { $0.next += errors }
    }

    func submit(_ request: NotificationRequest) async throws -> EnqueueResult {
        let failure = failures.withLock { state -> StoreError? in
            state.attempts += 1
            return state.next.isEmpty ? nil : state.next.removeFirst()
        }
        if let failure { throw failure }
        // The store's rule: unknown groups target nothing; only a request whose groups are all unknown and
        // that names no device is rejected.
        if request.devices.isEmpty, let first = request.groups.first,
            request.groups.allSatisfy({ !knownGroups.contains($0) })
        {
            throw StoreError.unknownGroup(app: request.app, group: first)
        }
        stored.withLock { $0.append(request) }
        return EnqueueResult(id: request.id, targetCount: request.devices.count + request.groups.count)
    }
}

/// Closed until opened; then every waiter (and every later one) passes.
final class Gate: Sendable {
    private struct State {
        var open = false
        var waiters: [CheckedContinuation<Void, Never>] = []
        var watchers: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    func wait() async {
        await withCheckedContinuation { continuation in
            let (passNow, watchers) = state.withLock { state in
                if state.open { return (true, [CheckedContinuation<Void, Never>]()) }
                state.waiters.append(continuation)
                defer { state.watchers = [] }
                return (false, state.watchers)
            }
            if passNow { continuation.resume() }
            for watcher in watchers { watcher.resume() }
        }
    }

    /// Returns once something waits at the closed gate.
    func untilHeld() async {
        await withCheckedContinuation { continuation in
            let held = state.withLock { state in
                if !state.waiters.isEmpty { return true }
                state.watchers.append(continuation)
                return false
            }
            if held { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// Keeps its own copy of the listener's counters and wakes tests waiting for a condition on them.
final class WaitingObserver: UDPIngressObserver {
    private struct Waiter {
        var predicate: @Sendable (UDPIngressStatistics) -> Bool
        var continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var statistics = UDPIngressStatistics()
        var waiters: [Int: Waiter] = [:]
        var expired = Set<Int>()
        var nextID = 0
        var lastApplied: ContinuousClock.Instant?
    }

    private let state = Mutex(State())

    var statistics: UDPIngressStatistics { state.withLock { $0.statistics } }
    /// When datagrams were last applied (for rates).
    var lastApplied: ContinuousClock.Instant? { state.withLock { $0.lastApplied } }

    func datagramReceived(on port: UDPIngressPort, bytes: Int) {
        update { $0[port].received += 1 }
    }

    func datagramsApplied(on port: UDPIngressPort, count: Int) {
        let now = ContinuousClock.now
        state.withLock { $0.lastApplied = now }
        update { $0[port].applied += count }
    }

    func datagramRejected(on port: UDPIngressPort, reason: String) {
        update { $0[port].rejected[reason, default: 0] += 1 }
    }

    func datagramRefused(on port: UDPIngressPort) {
        update { $0[port].refused += 1 }
    }

    func registrationBatchWritten(count: Int, duration: Duration) {
        update {
            $0.registrationBatches += 1
            $0.largestRegistrationBatch = max($0.largestRegistrationBatch, count)
        }
    }

    /// True once `predicate` holds; false if it still does not after `timeout` (a generous upper bound,
    /// not a synchronisation delay: the wait ends as soon as the counters match).
    func wait(
        timeout: Duration = .seconds(30),
        until predicate: @escaping @Sendable (UDPIngressStatistics) -> Bool
    ) async -> Bool {
        let id: Int? = state.withLock { state in
            if predicate(state.statistics) { return nil }
            defer { state.nextID += 1 }
            return state.nextID
        }
        guard let id else { return true }
        return await withTaskGroup(of: Bool?.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let now: Bool? = self.state.withLock { state in
                        if predicate(state.statistics) { return true }
                        if state.expired.contains(id) { return false }
                        state.waiters[id] = Waiter(predicate: predicate, continuation: continuation)
                        return nil
                    }
                    if let now { continuation.resume(returning: now) }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                if Task.isCancelled { return nil }
                let waiter = self.state.withLock { state in
                    let waiter = state.waiters.removeValue(forKey: id)
                    if waiter == nil { state.expired.insert(id) }
                    return waiter
                }
                waiter?.continuation.resume(returning: false)
                return nil
            }
            var result = false
            while let next = await group.next() {
                if let next {
                    result = next
                    group.cancelAll()
                }
            }
            return result
        }
    }

    private func update(_ change: (inout UDPIngressStatistics) -> Void) {
        let ready = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            change(&state.statistics)
            let statistics = state.statistics
            let readyIDs = state.waiters.filter { $0.value.predicate(statistics) }.map(\.key)
            return readyIDs.compactMap { state.waiters.removeValue(forKey: $0)?.continuation }
        }
        for continuation in ready { continuation.resume(returning: true) }
    }
}

/// A log handler that keeps every line, for tests that count them.
struct CapturingLogHandler: LogHandler {
    final class Lines: Sendable {
        private let lines = Mutex<[(level: Logger.Level, message: String, metadata: Logger.Metadata)]>([])
        func append(_ line: (Logger.Level, String, Logger.Metadata)) { lines.withLock { $0.append(line) } }
        var all: [(level: Logger.Level, message: String, metadata: Logger.Metadata)] { lines.withLock { $0 } }
    }

    let lines: Lines
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .debug

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        lines.append((event.level, "\(event.message)", metadata.merging(event.metadata ?? [:]) { $1 }))
    }
}
