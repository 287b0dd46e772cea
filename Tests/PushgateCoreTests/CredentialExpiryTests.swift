import Foundation
import PushgateCore
import Testing

@Suite("Credential expiry: stages and when to say so (pure)")
struct CredentialExpiryTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let api = CredentialExpiryTracker.Credential(app: "", kind: "http_tls_certificate")
    let news = CredentialExpiryTracker.Credential(app: "news", kind: "apns_certificate")

    func days(_ count: Double) -> Date { now.addingTimeInterval(count * 86_400) }

    @Test("the stages: more than 30 days, 30, 7, 1, expired")
    func stages() {
        typealias Stage = CredentialExpiryTracker.Stage
        #expect(Stage(expiry: days(31), now: now) == .fine)
        #expect(Stage(expiry: days(29.9), now: now) == .within30Days)
        #expect(Stage(expiry: days(6.9), now: now) == .within7Days)
        #expect(Stage(expiry: days(0.5), now: now) == .within1Day)
        #expect(Stage(expiry: days(-0.001), now: now) == .expired)
    }

    @Test("each stage is said once, as time passes; fine credentials say nothing")
    func oncePerStage() {
        var tracker = CredentialExpiryTracker()
        let expiries = [api: days(40), news: days(8)]
        #expect(tracker.check(expiries, now: now).map(\.credential) == [news], "news is within 30 days already")
        #expect(tracker.check(expiries, now: now.addingTimeInterval(3_600)).isEmpty, "an hour later: nothing new")
        let week = tracker.check(expiries, now: days(1.5))
        #expect(week.map(\.stage) == [.within7Days])
        #expect(tracker.check(expiries, now: days(1.6)).isEmpty)
        #expect(tracker.check(expiries, now: days(7.5)).map(\.stage) == [.within1Day])
        let late = tracker.check(expiries, now: days(10.5))
        #expect(late.map(\.credential) == [news, api] && late.map(\.stage) == [.expired, .within30Days])
        #expect(tracker.expired.map(\.credential) == [news])
    }

    @Test("a renewed credential leaves the expired list and is said again only when it nears its new expiry")
    func renewal() {
        var tracker = CredentialExpiryTracker()
        _ = tracker.check([news: days(-1)], now: now)
        #expect(tracker.expired.count == 1)
        #expect(tracker.check([news: days(365)], now: now).isEmpty)
        #expect(tracker.expired.isEmpty)
        #expect(tracker.check([news: days(365)], now: days(340)).map(\.stage) == [.within30Days])
    }
}
