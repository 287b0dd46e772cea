import Foundation
import PushgateCore
import Testing

@Suite("FCM token fetch back-off")
struct FCMTokenFetchBackoffTests {
    /// Always the same fraction of the random half: 0 (`.min`) or just under 1 (`.max`).
    struct Fixed: RandomNumberGenerator {
        var value: UInt64
        mutating func next() -> UInt64 { value }
    }

    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let outage = FCMCredentialError.exchangeFailed(detail: "status 503")
    static let refusal = FCMCredentialError.exchangeRefused(detail: "status 400 invalid_grant")

    @Test("5xx, timeouts and dropped connections are outages; invalid_grant and unreadable credentials are definitive")
    func classification() {
        #expect(!FCMCredentialError.exchangeFailed.isDefinitive)
        #expect(!FCMCredentialError.malformedGrant.isDefinitive)
        #expect(FCMCredentialError.exchangeRefused.isDefinitive)
        #expect(FCMCredentialError.signingFailed.isDefinitive)
        #expect(Self.refusal.safeDetail == "status 400 invalid_grant")
    }

    @Test("an outage backs off 0.5 s doubling to 30 s, with equal jitter: half the ceiling, plus up to the other half")
    func outageBackoff() {
        var backoff = FCMTokenFetchBackoff()
        var low = Fixed(value: .min)
        let expected: [TimeInterval] = [0.25, 0.5, 1, 2, 4, 8, 15, 15]
        var now = Self.now
        for (index, delay) in expected.enumerated() {
            let transition = backoff.fetchFailed(Self.outage, now: now, using: &low)
            let pause = backoff.pause!
            #expect(pause.retryAt == now.addingTimeInterval(delay), "failure \(index + 1)")
            #expect(pause.failures == index + 1)
            #expect(pause.since == Self.now)
            #expect(transition == (index == 0 ? .outageBegan(pause) : .persists(pause)))
            now = pause.retryAt
        }
        // The random half is drawn: at its top, the delay reaches (just under) the ceiling.
        var fresh = FCMTokenFetchBackoff()
        var high = Fixed(value: .max)
        _ = fresh.fetchFailed(Self.outage, now: Self.now, using: &high)
        let delay = fresh.pause!.retryAt.timeIntervalSince(Self.now)
        #expect(delay > 0.49 && delay <= 0.5)
    }

    @Test("during an outage's back-off a send waits for the next fetch; at its end it fetches; a success clears it")
    func outageDecisions() {
        var backoff = FCMTokenFetchBackoff()
        var generator = Fixed(value: .min)
        #expect(backoff.decide(now: Self.now) == .fetch)
        _ = backoff.fetchFailed(Self.outage, now: Self.now, using: &generator)
        let retryAt = Self.now.addingTimeInterval(0.25)
        #expect(backoff.decide(now: Self.now.addingTimeInterval(0.1)) == .wait(until: retryAt))
        #expect(!backoff.mayRefresh(now: Self.now.addingTimeInterval(0.1)))
        #expect(backoff.decide(now: retryAt) == .fetch)
        #expect(backoff.mayRefresh(now: retryAt))
        #expect(backoff.alarm == nil)
        #expect(backoff.fetchSucceeded() == .recovered(failures: 1, since: Self.now, wasRefusal: false))
        #expect(backoff.pause == nil)
        #expect(backoff.fetchSucceeded() == .none)
    }

    @Test("a definitive refusal raises the alarm once, is refused (not waited for) until 30 s doubling to 10 min")
    func refusal() {
        var backoff = FCMTokenFetchBackoff()
        var generator = Fixed(value: .min)
        let first = backoff.fetchFailed(Self.refusal, now: Self.now, using: &generator)
        let pause = backoff.pause!
        #expect(first == .alarmRaised(pause))
        #expect(pause.isRefusal)
        #expect(pause.retryAt == Self.now.addingTimeInterval(15))
        #expect(backoff.alarm == pause)
        #expect(backoff.decide(now: Self.now.addingTimeInterval(1)) == .refused(pause))
        #expect(backoff.decide(now: pause.retryAt) == .fetch)
        let second = backoff.fetchFailed(Self.refusal, now: pause.retryAt, using: &generator)
        #expect(second == .persists(backoff.pause!))
        #expect(backoff.pause!.retryAt == pause.retryAt.addingTimeInterval(30))
        for _ in 0..<10 { _ = backoff.fetchFailed(Self.refusal, now: Self.now, using: &generator) }
        #expect(backoff.pause!.retryAt == Self.now.addingTimeInterval(300))
        #expect(backoff.fetchSucceeded() == .recovered(failures: 12, since: Self.now, wasRefusal: true))
        #expect(backoff.alarm == nil)
    }

    @Test("an outage after a refusal ends the alarm; a refusal after an outage raises it")
    func kindsAlternate() {
        var backoff = FCMTokenFetchBackoff()
        var generator = Fixed(value: .min)
        _ = backoff.fetchFailed(Self.outage, now: Self.now, using: &generator)
        #expect(backoff.fetchFailed(Self.refusal, now: Self.now, using: &generator) == .alarmRaised(backoff.pause!))
        _ = backoff.fetchFailed(Self.outage, now: Self.now, using: &generator)
        #expect(backoff.alarm == nil)
        #expect(backoff.pause?.failures == 3)
        if case .wait = backoff.decide(now: Self.now) {} else { Issue.record("an outage is waited for") }
    }
}
