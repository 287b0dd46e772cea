import NIOCore
import Testing

@testable import APNsHTTP2
@testable import PushTransport

@Suite("Rate limiter (token bucket, time passed in)")
struct RateLimiterTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test("one at first, refills at the rate, never more than a second's worth")
    func refillsAtTheRate() {
        var limiter = RateLimiter(rate: 100)
        #expect(limiter.allowance(now: start) == 1)
        limiter.spend(1)
        #expect(limiter.allowance(now: start) == 0)
        #expect(limiter.waitForNext == .nanoseconds(10_000_001))
        #expect(limiter.allowance(now: start + .milliseconds(50)) == 5)
        limiter.spend(5)
        #expect(limiter.allowance(now: start + .seconds(10)) == 100, "capped at one second's worth")
        #expect(limiter.waitForNext == .zero)
    }
}
