import Foundation
import PushgateCore
import Testing

@Suite("Retry policy")
struct RetryPolicyTests {
    let policy = RetryPolicy()
    let first = Date.testEpoch

    private func decide(
        _ outcome: OutcomeClass,
        attempt: Int = 1,
        expiration: Expiration,
        afterSeconds elapsed: Double = 0,
        policy: RetryPolicy? = nil,
        random: UInt64 = .max
    ) -> RetryPolicy.Decision {
        var generator = ConstantGenerator(value: random)
        return (policy ?? self.policy).decide(
            after: outcome,
            attempt: attempt,
            expiration: expiration,
            acceptedAt: first,
            now: first.addingTimeInterval(elapsed),
            using: &generator
        )
    }

    private var inOneHour: Expiration { .at(epochSeconds: 1_800_000_000 + 3600) }

    @Test(
        "rejected outcomes are never retried",
        arguments: [Expiration.immediately, .storagePolicy, .at(epochSeconds: 1_800_003_600)]
    )
    func rejectedNeverRetries(expiration: Expiration) {
        for attempt in 1...3 {
            #expect(decide(.rejected, attempt: attempt, expiration: expiration) == .giveUp(.rejected))
        }
    }

    @Test("an accepted outcome has nothing to retry")
    func acceptedStops() {
        #expect(decide(.accepted, expiration: inOneHour) == .giveUp(.accepted))
    }

    @Test(
        "retryable and connection-fatal outcomes retry with back-off before the expiration",
        arguments: [OutcomeClass.retryable, .connectionFatal]
    )
    func retriesWithBackoff(outcome: OutcomeClass) {
        guard case .retry(let firstDelay) = decide(outcome, attempt: 1, expiration: inOneHour) else {
            Issue.record("expected a retry")
            return
        }
        #expect(firstDelay <= .seconds(1))
        guard case .retry(let laterDelay) = decide(outcome, attempt: 5, expiration: inOneHour, afterSeconds: 60) else {
            Issue.record("expected a retry")
            return
        }
        #expect(laterDelay > .seconds(15) && laterDelay <= .seconds(16))
        guard case .retry(let cappedDelay) = decide(outcome, attempt: 40, expiration: inOneHour, afterSeconds: 600)
        else {
            Issue.record("expected a retry")
            return
        }
        #expect(cappedDelay <= .seconds(300))
    }

    @Test("retries stop once the expiration has passed", arguments: [OutcomeClass.retryable, .connectionFatal])
    func stopsAtExpiration(outcome: OutcomeClass) {
        #expect(decide(outcome, attempt: 3, expiration: inOneHour, afterSeconds: 3600) == .giveUp(.expired))
        #expect(decide(outcome, attempt: 3, expiration: inOneHour, afterSeconds: 7200) == .giveUp(.expired))
        #expect(decide(outcome, expiration: .at(epochSeconds: 1_700_000_000)) == .giveUp(.expired))
    }

    @Test("the last retry is scheduled at the expiration, not after it")
    func lastDelayShortened() {
        // 10 s left; attempt 8 would wait up to 128 s.
        #expect(
            decide(.retryable, attempt: 8, expiration: inOneHour, afterSeconds: 3590) == .retry(after: .seconds(10))
        )
    }

    @Test("expiration 0 gets at most 3 attempts")
    func immediateAttempts() {
        #expect(decide(.retryable, attempt: 1, expiration: .immediately) != .giveUp(.attemptsExhausted))
        #expect(
            decide(.retryable, attempt: 2, expiration: .immediately, afterSeconds: 2) != .giveUp(.attemptsExhausted)
        )
        #expect(
            decide(.retryable, attempt: 3, expiration: .immediately, afterSeconds: 5) == .giveUp(.attemptsExhausted)
        )
        #expect(
            decide(.connectionFatal, attempt: 3, expiration: .immediately, afterSeconds: 5)
                == .giveUp(.attemptsExhausted)
        )
    }

    @Test("expiration 0 is retried only within 60 seconds of the first attempt")
    func immediateWindow() {
        #expect(
            decide(.retryable, attempt: 1, expiration: .immediately, afterSeconds: 59)
                == .retry(after: .seconds(1) - .nanoseconds(1))
        )
        #expect(decide(.retryable, attempt: 1, expiration: .immediately, afterSeconds: 60) == .giveUp(.expired))
        #expect(
            decide(.retryable, attempt: 2, expiration: .immediately, afterSeconds: 59.5)
                == .retry(after: .milliseconds(500))
        )
    }

    @Test("the budget for expiration 0 is configurable")
    func immediateConfigurable() {
        let generous = RetryPolicy(immediateMaximumAttempts: 5, immediateWindow: .seconds(10))
        #expect(
            decide(.retryable, attempt: 4, expiration: .immediately, afterSeconds: 5, policy: generous)
                != .giveUp(.attemptsExhausted)
        )
        #expect(
            decide(.retryable, attempt: 5, expiration: .immediately, afterSeconds: 5, policy: generous)
                == .giveUp(.attemptsExhausted)
        )
        #expect(
            decide(.retryable, attempt: 2, expiration: .immediately, afterSeconds: 10, policy: generous)
                == .giveUp(.expired)
        )
    }

    @Test("no expiration (APNs storage policy) is retried for a default lifetime of one hour")
    func storagePolicyLifetime() {
        #expect(decide(.retryable, attempt: 10, expiration: .storagePolicy, afterSeconds: 3500) != .giveUp(.expired))
        #expect(decide(.retryable, attempt: 10, expiration: .storagePolicy, afterSeconds: 3600) == .giveUp(.expired))
        let short = RetryPolicy(storagePolicyLifetime: .seconds(120))
        #expect(
            decide(.retryable, attempt: 2, expiration: .storagePolicy, afterSeconds: 121, policy: short)
                == .giveUp(.expired)
        )
    }

    @Test("an expiration far in the future is retried for at most 30 days")
    func maximumLifetime() {
        let farFuture = Expiration.at(epochSeconds: 4_000_000_000)
        #expect(policy.deadline(for: farFuture, acceptedAt: first) == first.addingTimeInterval(30 * 86_400))
        #expect(decide(.retryable, attempt: 50, expiration: farFuture, afterSeconds: 30 * 86_400) == .giveUp(.expired))
    }

    @Test("deadlines follow the expiration")
    func deadlines() {
        #expect(policy.deadline(for: .immediately, acceptedAt: first) == first.addingTimeInterval(60))
        #expect(policy.deadline(for: .storagePolicy, acceptedAt: first) == first.addingTimeInterval(3600))
        #expect(policy.deadline(for: inOneHour, acceptedAt: first) == first.addingTimeInterval(3600))
    }

    @Test("retry delays always lie within the back-off's bounds")
    func delaysBounded() {
        var generator = SplitMix64(seed: 99)
        for attempt in 1...30 {
            let decision = policy.decide(
                after: .retryable,
                attempt: attempt,
                expiration: .at(epochSeconds: 1_800_864_000),
                acceptedAt: first,
                now: first,
                using: &generator
            )
            guard case .retry(let delay) = decision else {
                Issue.record("expected a retry at attempt \(attempt)")
                continue
            }
            #expect(delay >= .zero && delay <= policy.backoff.ceiling(forAttempt: attempt))
        }
    }
}
