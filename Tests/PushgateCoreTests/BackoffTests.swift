import PushgateCore
import Testing

@Suite("Exponential back-off with full jitter")
struct BackoffTests {
    let backoff = Backoff(base: .milliseconds(100), multiplier: 2, cap: .seconds(30))

    @Test("the ceiling starts at the base and doubles per attempt")
    func ceilingGrows() {
        #expect(backoff.ceiling(forAttempt: 1) == .milliseconds(100))
        #expect(backoff.ceiling(forAttempt: 2) == .milliseconds(200))
        #expect(backoff.ceiling(forAttempt: 3) == .milliseconds(400))
        #expect(backoff.ceiling(forAttempt: 9) == .milliseconds(25_600))
    }

    @Test("the ceiling stops at the cap, however many attempts")
    func ceilingCapped() {
        #expect(backoff.ceiling(forAttempt: 10) == .seconds(30))
        #expect(backoff.ceiling(forAttempt: 1_000) == .seconds(30))
        #expect(backoff.ceiling(forAttempt: Int.max) == .seconds(30))
    }

    @Test("attempt numbers below 1 count as the first attempt")
    func attemptBelowOne() {
        #expect(backoff.ceiling(forAttempt: 0) == .milliseconds(100))
        #expect(backoff.ceiling(forAttempt: -5) == .milliseconds(100))
    }

    @Test("every delay lies in [0, ceiling) and so within [0, cap]")
    func delaysWithinBounds() {
        var generator = SplitMix64(seed: 42)
        for attempt in 1...40 {
            let ceiling = backoff.ceiling(forAttempt: attempt)
            for _ in 0..<200 {
                let delay = backoff.delay(forAttempt: attempt, using: &generator)
                #expect(delay >= .zero)
                #expect(delay < ceiling)
                #expect(delay <= backoff.cap)
            }
        }
    }

    @Test("delays are jittered: they spread over the range instead of repeating")
    func delaysAreJittered() {
        var generator = SplitMix64(seed: 7)
        let delays = (0..<100).map { _ in backoff.delay(forAttempt: 5, using: &generator) }
        #expect(Set(delays).count > 90)
        #expect(delays.contains { $0 < .milliseconds(400) })
        #expect(delays.contains { $0 > .milliseconds(1_200) })
    }

    @Test("the extremes of the random source give zero and just under the ceiling")
    func extremes() {
        var low = ConstantGenerator(value: 0)
        var high = ConstantGenerator(value: .max)
        #expect(backoff.delay(forAttempt: 3, using: &low) == .zero)
        let top = backoff.delay(forAttempt: 3, using: &high)
        #expect(top < .milliseconds(400))
        #expect(top > .milliseconds(399))
    }

    @Test("the same seed gives the same delays")
    func deterministic() {
        var first = SplitMix64(seed: 1)
        var second = SplitMix64(seed: 1)
        for attempt in 1...20 {
            #expect(
                backoff.delay(forAttempt: attempt, using: &first) == backoff.delay(forAttempt: attempt, using: &second)
            )
        }
    }

    @Test("the reconnect back-off is 100 ms doubling to 30 s")
    func reconnectDefaults() {
        #expect(Backoff.reconnect == Backoff(base: .milliseconds(100), multiplier: 2, cap: .seconds(30)))
    }

    @Test("out-of-range settings are corrected instead of trapping")
    func outOfRangeSettings() {
        let odd = Backoff(base: .seconds(-1), multiplier: 0.5, cap: .seconds(-5))
        #expect(odd == Backoff(base: .zero, multiplier: 1, cap: .zero))
        var generator = SplitMix64(seed: 2)
        #expect(odd.delay(forAttempt: 10, using: &generator) == .zero)
        let capBelowBase = Backoff(base: .seconds(2), multiplier: .nan, cap: .seconds(1))
        #expect(capBelowBase.cap == .seconds(2))
        #expect(capBelowBase.ceiling(forAttempt: 5) == .seconds(2))
    }

    @Test("a fractional multiplier grows the ceiling by that factor")
    func fractionalMultiplier() {
        let gentle = Backoff(base: .seconds(1), multiplier: 1.5, cap: .seconds(10))
        #expect(gentle.ceiling(forAttempt: 2) == .milliseconds(1_500))
        #expect(gentle.ceiling(forAttempt: 3) == .milliseconds(2_250))
    }
}

@Suite("Connection back-off")
struct ConnectionBackoffTests {
    @Test("each failed connect waits longer, up to 30 s, and a connection starts over")
    func growsAndResets() {
        var backoff = ConnectionBackoff()
        var high = ConstantGenerator(value: .max)
        var delays = [Duration]()
        for _ in 0..<12 { delays.append(backoff.connectFailed(using: &high)) }
        #expect(backoff.consecutiveFailures == 12)
        #expect(delays[0] < .milliseconds(100) && delays[0] > .milliseconds(99))
        #expect(delays[1] > .milliseconds(199) && delays[1] < .milliseconds(200))
        #expect(zip(delays, delays.dropFirst()).allSatisfy { $0 <= $1 })
        #expect(delays.last! > .seconds(29) && delays.last! < .seconds(30))

        backoff.connected()
        #expect(backoff.consecutiveFailures == 0)
        #expect(backoff.connectFailed(using: &high) < .milliseconds(100))
    }

    @Test("connect delays are jittered within [0, 30 s]")
    func jittered() {
        var backoff = ConnectionBackoff()
        var generator = SplitMix64(seed: 3)
        for _ in 0..<500 {
            let delay = backoff.connectFailed(using: &generator)
            #expect(delay >= .zero && delay <= .seconds(30))
        }
    }
}
