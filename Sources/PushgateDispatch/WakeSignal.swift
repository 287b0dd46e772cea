import Dispatch
import Synchronization

/// A one-slot wake-up: `signal()` wakes the current waiter, or the next one if nobody waits yet.
/// `wait(timeout:)` returns on a signal or when the timeout passes, whichever comes first.
final class WakeSignal: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
        var generation: UInt64 = 0
    }
    private let state = Mutex(State())

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.pending = true
            return nil
        }
        waiter?.resume()
    }

    /// Cancellation wakes the waiter once, like a signal. A task that is already cancelled still waits
    /// (for a signal or the timeout): a loop winding down after cancellation must not spin and starve
    /// the cooperative threads that the work it waits for runs on.
    func wait(timeout: Duration) async {
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
            let nanoseconds = max(0, timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000)
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(min(nanoseconds, Int64(Int.max))))) {
                self.timeOut(generation)
            }
        }
    }

    private func timeOut(_ generation: UInt64) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.generation == generation, let waiter = state.waiter else { return nil }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }
}
