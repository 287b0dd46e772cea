import Synchronization

/// A one-slot wake-up: `signal()` wakes the current waiter, or the next one if nobody waits yet.
/// `wait(timeout:)` returns on a signal or when the timeout passes on the injected clock, whichever
/// comes first.
package final class WakeSignal: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
        var generation: UInt64 = 0
        /// The sleep that ends the current wait; cancelled when a signal ends it first.
        var timer: Task<Void, Never>?
    }
    private let state = Mutex(State())
    private let clock: any Clock<Duration>

    package init(clock: any Clock<Duration> = ContinuousClock()) {
        self.clock = clock
    }

    package func signal() {
        let (waiter, timer) = state.withLock { state -> (CheckedContinuation<Void, Never>?, Task<Void, Never>?) in
            guard let waiter = state.waiter else {
                state.pending = true
                return (nil, nil)
            }
            state.waiter = nil
            defer { state.timer = nil }
            return (waiter, state.timer)
        }
        timer?.cancel()
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
            let generation = state.withLock { state -> UInt64? in
                if state.pending {
                    state.pending = false
                    return nil
                }
                state.generation &+= 1
                state.waiter = continuation
                return state.generation
            }
            guard let generation else {
                continuation.resume()
                return
            }
            // Not a child task: the sleep must not inherit the waiter's cancellation (see `wait`).
            let clock = self.clock
            let timer = Task {
                do { try await clock.sleep(for: timeout) } catch { return }
                self.timeOut(generation)
            }
            let stale = state.withLock { state -> Bool in
                guard state.generation == generation, state.waiter != nil else { return true }
                state.timer = timer
                return false
            }
            if stale { timer.cancel() }
        }
    }

    private func timeOut(_ generation: UInt64) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.generation == generation, let waiter = state.waiter else { return nil }
            state.waiter = nil
            state.timer = nil
            return waiter
        }
        waiter?.resume()
    }
}
