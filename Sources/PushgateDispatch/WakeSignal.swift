import Synchronization

/// A one-slot wake-up: `signal()` wakes the current waiter, or the next one if nobody waits yet.
/// `wait(timeout:)` returns on a signal or when the timeout passes on the injected clock, whichever
/// comes first.
///
/// Timeouts share one timer task, which is never cancelled by a signal. A signal only resumes the
/// waiter; the timer sleeps on to its wake-up time, then resumes the waiter of that moment if its
/// deadline has passed, sleeps again until that waiter's deadline if not, and ends when nobody waits.
/// The dispatcher waits and is signalled thousands of times a second during a broadcast: a timer task
/// started per wait and cancelled per signal made the canceller hold the sleeping task's status lock
/// while that task, resumed by the cancellation, started on another thread and blocked on the same
/// lock (`swift::removeStatusRecord`, about 38 blocked cooperative threads a second in a soak, `perf
/// record -e sched:sched_switch`). libdispatch's monitor adds a worker to the cooperative pool when it
/// finds one of its threads blocked while work waits, which the one-hour soak counted as a thread more.
package final class WakeSignal: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
        /// When the current waiter times out, as time since the timer's origin.
        var waiterDeadline: Duration?
        /// When the running timer task wakes next; nil while none runs.
        var timerWakesAt: Duration?
        /// The running timer task's number; a task whose number is no longer this one ends.
        var timerID: UInt64 = 0
        /// The running timer task, cancelled only when a wait needs an earlier wake-up than it has.
        var timer: Task<Void, Never>?
    }
    private let state = Mutex(State())
    private let clock: any WakeTimerClock

    package init(clock: some Clock<Duration> = ContinuousClock()) {
        self.clock = TimerClock(clock)
    }

    /// True while a wait is under way (for tests that must act only once the waiter is registered).
    package var hasWaiter: Bool { state.withLock { $0.waiter != nil } }

    package func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            state.waiterDeadline = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Cancellation wakes the waiter once, like a signal. A task that is already cancelled still waits
    /// (for a signal or the timeout): a loop winding down after cancellation must not spin and starve
    /// the cooperative threads that the work it waits for runs on.
    package func wait(timeout: Duration) async {
        if Task.isCancelled {
            await suspend(timeout: timeout)
            return
        }
        await withTaskCancellationHandler {
            await suspend(timeout: timeout)
        } onCancel: {
            self.signal()
        }
    }

    private func suspend(timeout: Duration) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let deadline = clock.elapsed() + timeout
            enum Start {
                case now, wait
                case timer(id: UInt64, superseded: Task<Void, Never>?)
            }
            let start = state.withLock { state -> Start in
                if state.pending {
                    state.pending = false
                    return .now
                }
                state.waiter = continuation
                state.waiterDeadline = deadline
                // A timer that wakes by then serves this wait too (it sleeps again if it wakes early).
                if let wakesAt = state.timerWakesAt, wakesAt <= deadline { return .wait }
                state.timerID &+= 1
                state.timerWakesAt = deadline
                defer { state.timer = nil }
                return .timer(id: state.timerID, superseded: state.timer)
            }
            switch start {
            case .now:
                continuation.resume()
            case .wait:
                break
            case .timer(let id, let superseded):
                // Rare: only when this wait needs an earlier wake-up than the running timer's.
                superseded?.cancel()
                // Not a child task: the sleep must not inherit the waiter's cancellation (see `wait`).
                let clock = self.clock
                // Holds the signal only weakly while it sleeps: a signal dropped meanwhile is not kept alive.
                let timer = Task { [weak self] in
                    await Self.runTimer(id: id, firstWake: deadline, clock: clock) { [weak self] in self }
                }
                state.withLock { state in
                    if state.timerID == id { state.timer = timer }
                }
            }
        }
    }

    /// The timer task: sleeps until its wake-up time, then times the waiter out if its deadline passed,
    /// sleeps on until the waiter's deadline if not, and ends when nobody waits (or a newer timer took over).
    private static func runTimer(
        id: UInt64,
        firstWake: Duration,
        clock: any WakeTimerClock,
        signal: @Sendable () -> WakeSignal?
    ) async {
        var wakeAt = firstWake
        while true {
            do { try await clock.sleep(untilElapsed: wakeAt) } catch { return }
            guard let signal = signal() else { return }
            let now = clock.elapsed()
            enum Next {
                case end
                case timeOut(CheckedContinuation<Void, Never>)
                case sleep(until: Duration)
            }
            let next = signal.state.withLock { state -> Next in
                guard state.timerID == id else { return .end }
                guard let waiter = state.waiter, let deadline = state.waiterDeadline else {
                    state.timerWakesAt = nil
                    state.timer = nil
                    return .end
                }
                if deadline > now {
                    state.timerWakesAt = deadline
                    return .sleep(until: deadline)
                }
                state.waiter = nil
                state.waiterDeadline = nil
                state.timerWakesAt = nil
                state.timer = nil
                return .timeOut(waiter)
            }
            switch next {
            case .end:
                return
            case .timeOut(let waiter):
                waiter.resume()
                return
            case .sleep(let until):
                wakeAt = until
            }
        }
    }
}

/// The injected clock behind an existential, with times as durations since the signal was made.
private protocol WakeTimerClock: Sendable {
    func elapsed() -> Duration
    func sleep(untilElapsed: Duration) async throws
}

private struct TimerClock<C: Clock>: WakeTimerClock where C.Duration == Duration {
    let clock: C
    let origin: C.Instant

    init(_ clock: C) {
        self.clock = clock
        self.origin = clock.now
    }

    func elapsed() -> Duration { origin.duration(to: clock.now) }

    func sleep(untilElapsed elapsed: Duration) async throws {
        try await clock.sleep(until: origin.advanced(by: elapsed), tolerance: nil)
    }
}
