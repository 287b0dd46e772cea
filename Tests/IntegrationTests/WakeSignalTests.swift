import PushgateDispatch
import Testing

/// `WakeSignal` times out on the clock it is given: on a manual clock, nothing happens until the
/// test moves it. With a real timer the one-hour timeouts below would outlast the time limit. Every wait
/// is on an event; the limit is a safety net against a hang, not a budget: in CI's full parallel run the
/// 100 rounds of `signalledWaitsShareOneTimer` took 103 s of scheduling (issue #27).
@Suite("WakeSignal on an injected clock", .timeLimit(.minutes(5)))
struct WakeSignalTests {
    /// Waits for the waiter; if the test is cancelled (its time limit), cancels the waiter, which wakes it.
    static func finish(_ waiter: Task<Void, Never>) async {
        await withTaskCancellationHandler {
            await waiter.value
        } onCancel: {
            waiter.cancel()
        }
    }

    /// Returns once a wait is under way (a few scheduler turns; the waiter is a task of its own).
    static func registered(_ signal: WakeSignal) async {
        while !signal.hasWaiter { await Task.yield() }
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

    @Test("a signal ends the wait before its timeout; the timer is not cancelled, it ends when it wakes to nobody")
    func signalEndsTheWait() async {
        let clock = ManualClock()
        let signal = WakeSignal(clock: clock)
        let waiter = Task { await signal.wait(timeout: .seconds(3_600)) }
        await clock.pendingSleeps(become: 1)
        signal.signal()
        await Self.finish(waiter)
        #expect(clock.now == ManualClock.Instant(offset: .zero))
        #expect(clock.pendingSleeps == 1, "a signal must not cancel the timer's sleep")
        clock.advance(by: .seconds(3_600))
        await clock.pendingSleeps(become: 0)
    }

    @Test("waits ended by signals share one timer: after 100 of them one sleep is pending, not 0 or 100")
    func signalledWaitsShareOneTimer() async {
        let clock = ManualClock()
        let signal = WakeSignal(clock: clock)
        for _ in 0..<100 {
            let waiter = Task { await signal.wait(timeout: .seconds(3_600)) }
            await clock.pendingSleeps(become: 1)
            signal.signal()
            await Self.finish(waiter)
        }
        #expect(clock.pendingSleeps == 1)
    }

    @Test("a wait whose deadline is later than the timer's wake-up is timed out by that timer, which sleeps again")
    func laterDeadlineReusesTheTimer() async {
        let clock = ManualClock()
        let signal = WakeSignal(clock: clock)
        let first = Task { await signal.wait(timeout: .seconds(10)) }
        await clock.pendingSleeps(become: 1)
        signal.signal()
        await Self.finish(first)
        let second = Task { await signal.wait(timeout: .seconds(100)) }
        await Self.registered(signal)
        #expect(clock.pendingSleeps == 1, "the first wait's timer serves the second")
        clock.advance(by: .seconds(10))
        await clock.pendingSleeps(become: 1)
        #expect(clock.pendingSleeps == 1)
        clock.advance(by: .seconds(90))
        await Self.finish(second)
        await clock.pendingSleeps(become: 0)
    }

    @Test("a wait that needs an earlier wake-up than the running timer's gets one, and the old timer is dropped")
    func earlierDeadlineStartsATimer() async {
        let clock = ManualClock()
        let signal = WakeSignal(clock: clock)
        let first = Task { await signal.wait(timeout: .seconds(3_600)) }
        await clock.pendingSleeps(become: 1)
        signal.signal()
        await Self.finish(first)
        let second = Task { await signal.wait(timeout: .seconds(5)) }
        await Self.registered(signal)
        // The hour-long sleep is cancelled and a 5 s one takes its place (it is due at once if it sleeps
        // only after the clock moved).
        clock.advance(by: .seconds(5))
        await Self.finish(second)
        await clock.pendingSleeps(become: 0)
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

    @Test("cancelling the waiting task wakes it at once; its timer ends when it wakes to nobody")
    func cancellationWakesTheWaiter() async {
        let clock = ManualClock()
        let signal = WakeSignal(clock: clock)
        let waiter = Task { await signal.wait(timeout: .seconds(3_600)) }
        await clock.pendingSleeps(become: 1)
        waiter.cancel()
        await Self.finish(waiter)
        #expect(clock.now == ManualClock.Instant(offset: .zero))
        clock.advance(by: .seconds(3_600))
        await clock.pendingSleeps(become: 0)
    }
}
