import Synchronization

/// A `Clock` that moves only when a test advances it. Sleepers wake when it reaches their deadline;
/// a cancelled sleep throws `CancellationError` at once. A test can wait, without polling, until a
/// given number of sleeps are pending.
final class ManualClock: Clock, Sendable {
    struct Instant: InstantProtocol {
        var offset: Duration

        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (left: Instant, right: Instant) -> Bool { left.offset < right.offset }
    }

    private struct Sleeper {
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [UInt64: Sleeper] = [:]
        /// Sleeps and watchers cancelled before they were registered.
        var cancelled: Set<UInt64> = []
        var nextID: UInt64 = 0
        var watchers: [(id: UInt64, count: Int, continuation: CheckedContinuation<Void, Never>)] = []

        /// The watchers whose count the pending sleeps now match, removed.
        mutating func satisfiedWatchers() -> [CheckedContinuation<Void, Never>] {
            let count = sleepers.count
            defer { watchers.removeAll { $0.count == count } }
            return watchers.filter { $0.count == count }.map(\.continuation)
        }
    }

    private let state = Mutex(State())

    init() {}

    var now: Instant { state.withLock { $0.now } }
    var minimumResolution: Duration { .zero }
    var pendingSleeps: Int { state.withLock { $0.sleepers.count } }

    func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Start { case wait, due, cancelled }
                let (start, watchers) = state.withLock { state -> (Start, [CheckedContinuation<Void, Never>]) in
                    if state.cancelled.remove(id) != nil { return (.cancelled, []) }
                    if deadline <= state.now { return (.due, []) }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return (.wait, state.satisfiedWatchers())
                }
                for watcher in watchers { watcher.resume() }
                switch start {
                case .wait: break
                case .due: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let (sleeper, watchers) = state.withLock { state -> (Sleeper?, [CheckedContinuation<Void, Never>]) in
                guard let sleeper = state.sleepers.removeValue(forKey: id) else {
                    state.cancelled.insert(id)
                    return (nil, [])
                }
                return (sleeper, state.satisfiedWatchers())
            }
            for watcher in watchers { watcher.resume() }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock forward and wakes every sleep whose deadline it reached.
    func advance(by duration: Duration) {
        let (due, watchers) = state.withLock { state -> ([Sleeper], [CheckedContinuation<Void, Never>]) in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { state.sleepers.removeValue(forKey: id) }
            return (Array(due.values), due.isEmpty ? [] : state.satisfiedWatchers())
        }
        for watcher in watchers { watcher.resume() }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Returns once exactly `count` sleeps are pending, or when the waiting task is cancelled (a test's
    /// time limit), so that a test whose sleeps never reach this clock fails instead of hanging.
    func pendingSleeps(become count: Int) async {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let done = state.withLock { state in
                    if state.sleepers.count == count || state.cancelled.remove(id) != nil { return true }
                    state.watchers.append((id, count, continuation))
                    return false
                }
                if done { continuation.resume() }
            }
        } onCancel: {
            let watcher = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard let index = state.watchers.firstIndex(where: { $0.id == id }) else {
                    state.cancelled.insert(id)
                    return nil
                }
                return state.watchers.remove(at: index).continuation
            }
            watcher?.resume()
        }
    }
}
