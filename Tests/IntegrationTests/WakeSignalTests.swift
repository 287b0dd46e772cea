import PushgateDispatch
import Testing

/// `WakeSignal` times out on the clock it is given: on a manual clock, nothing happens until the
/// test moves it. With a real timer the one-hour timeouts below would outlast the time limit.
@Suite("WakeSignal on an injected clock", .timeLimit(.minutes(1)))
struct WakeSignalTests {
    /// Waits for the waiter; if the test is cancelled (its time limit), cancels the waiter, which wakes it.
    static func finish(_ waiter: Task<Void, Never>) async {
        await withTaskCancellationHandler {
            await waiter.value
        } onCancel: {
            waiter.cancel()
        }
    }

    @Test("the timeout is a sleep on the injected clock: the wait ends when that clock reaches it, not before")
    func timeoutFollowsTheClock() async {
        let clock = ManualClock()
        let signal = WakeSignal(clock: clock)
        let waiter = Task { await signal.wait(timeout: .seconds(3_600)) }
        await clock.pendingSleeps(become: 1)
        clock.advance(by: .seconds(3_599))
        #expect(clock.pendingSleeps == 1, "the timeout ended before its hour on the injected clock")
        clock.advance(by: .seconds(1))
        await Self.finish(waiter)
        #expect(clock.pendingSleeps == 0)
    }

    @Test("a signal ends the wait before its timeout and cancels the timeout's sleep")
    func signalEndsTheWait() async {
        let clock = ManualClock()
        let signal = WakeSignal(clock: clock)
        let waiter = Task { await signal.wait(timeout: .seconds(3_600)) }
        await clock.pendingSleeps(become: 1)
        signal.signal()
        await Self.finish(waiter)
        await clock.pendingSleeps(become: 0)
        #expect(clock.now == ManualClock.Instant(offset: .zero))
    }

    @Test("a signal with nobody waiting ends the next wait at once; one slot only, so the wait after that sleeps")
    func signalIsKeptForTheNextWait() async {
        let clock = ManualClock()
        let signal = WakeSignal(clock: clock)
        signal.signal()
        signal.signal()
        await signal.wait(timeout: .seconds(3_600))
        #expect(clock.pendingSleeps == 0)
        let waiter = Task { await signal.wait(timeout: .seconds(5)) }
        await clock.pendingSleeps(become: 1)
        clock.advance(by: .seconds(5))
        await Self.finish(waiter)
    }

    @Test("cancelling the waiting task wakes it and cancels the timeout's sleep")
    func cancellationWakesTheWaiter() async {
        let clock = ManualClock()
        let signal = WakeSignal(clock: clock)
        let waiter = Task { await signal.wait(timeout: .seconds(3_600)) }
        await clock.pendingSleeps(become: 1)
        waiter.cancel()
        await Self.finish(waiter)
        await clock.pendingSleeps(become: 0)
    }
}
