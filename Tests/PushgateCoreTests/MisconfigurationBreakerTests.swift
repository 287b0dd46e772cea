import Foundation
import PushgateCore
import Testing

@Suite("Misconfiguration breaker: a wrong environment or project holds devices instead of invalidating them")
struct MisconfigurationBreakerTests {
    typealias Breaker = MisconfigurationBreaker
    let start = Date.testEpoch
    let news = Breaker.Key(app: "news", service: .apns)
    /// When the 100th answer of `feed` (1/1024 s apart, binary fractions keep the dates exact) trips it.
    let trip = 99.0 / 1024

    private func at(_ seconds: Double) -> Date { start.addingTimeInterval(seconds) }

    /// Feeds `count` answers of `key` 1 ms apart from `from` seconds; returns the decisions.
    private func feed(
        _ breaker: inout Breaker,
        _ key: Breaker.Key,
        _ answer: Breaker.Answer,
        count: Int,
        from: Double = 0
    ) -> [Breaker.Decision] {
        (0..<count).map { breaker.answered(key, answer, now: at(from + Double($0) / 1024)) }
    }

    private func ticket(_ decision: Breaker.Decision) -> Breaker.Ticket? {
        if case .deferred(let ticket) = decision.verdict { return ticket }
        return nil
    }

    @Test(
        "100 BadDeviceToken answers within a minute: the first 99 are deferred, the 100th trips the alarm and is held"
    )
    func wholeSampleSuspectTrips() throws {
        var breaker = Breaker()
        let decisions = feed(&breaker, news, .suspect(.environment), count: 100)
        #expect(decisions.prefix(99).allSatisfy { ticket($0) != nil && $0.transition == nil })
        let last = try #require(decisions.last)
        #expect(last.verdict == .hold(until: at(trip + 30)))
        guard case .tripped(let alarm) = last.transition else {
            Issue.record("expected a trip, got \(String(describing: last.transition))")
            return
        }
        #expect(alarm.key == news && alarm.suspicion == .environment && alarm.suspects == 100 && alarm.answers == 100)
        #expect(breaker.alarms.map(\.key) == [news])
        #expect(breaker.isHoldingAny)
    }

    @Test("the deferred answers that counted toward the trip are held, not invalidated, when resolved")
    func deferredAnswersOfATripAreHeld() {
        var breaker = Breaker()
        let decisions = feed(&breaker, news, .suspect(.environment), count: 100)
        for ticket in decisions.compactMap(ticket) {
            #expect(breaker.resolve(ticket, now: at(1)) == .hold(until: at(trip + 30)))
        }
    }

    @Test("10 BadDeviceToken among 290 accepted answers: no trip; each is genuine once 100 newer answers came")
    func fewSuspectsAreGenuine() {
        var breaker = Breaker()
        var tickets: [(ticket: Breaker.Ticket, index: Int)] = []
        for index in 0..<300 {
            let answer: Breaker.Answer = index % 30 == 0 ? .suspect(.environment) : .sane
            let decision = breaker.answered(news, answer, now: at(Double(index) / 1024))
            #expect(decision.transition == nil)
            if let ticket = ticket(decision) { tickets.append((ticket, index)) }
            for (pending, answeredIndex) in tickets {
                let expected: Breaker.Verdict = index - answeredIndex >= 100 ? .proceed : .deferred(pending)
                #expect(breaker.resolve(pending, now: at(Double(index) / 1024)) == expected)
            }
        }
        #expect(tickets.count == 10)
        #expect(breaker.alarms.isEmpty)
    }

    @Test("one BadDeviceToken in a quiet app is deferred for the window (a minute), then genuine")
    func quietAppWaitsForTheWindow() throws {
        var breaker = Breaker()
        let pending = try #require(ticket(breaker.answered(news, .suspect(.environment), now: at(0))))
        #expect(breaker.resolve(pending, now: at(59.9)) == .deferred(pending))
        #expect(breaker.resolve(pending, now: at(60)) == .proceed)
    }

    @Test("100 suspect answers spread over more than a minute never trip")
    func slowSuspectsDoNotTrip() {
        var breaker = Breaker()
        for index in 0..<200 {
            let decision = breaker.answered(news, .suspect(.environment), now: at(Double(index) * 0.7))
            #expect(decision.transition == nil, "answer \(index)")
        }
        #expect(breaker.alarms.isEmpty)
    }

    @Test("exactly half of the sample suspect does not trip; one more suspect does")
    func shareMustExceedTheThreshold() {
        var breaker = Breaker()
        _ = feed(&breaker, news, .sane, count: 50)
        let half = feed(&breaker, news, .suspect(.environment), count: 50, from: 1)
        #expect(half.allSatisfy { $0.transition == nil })
        let tipping = breaker.answered(news, .suspect(.environment), now: at(2))
        guard case .tripped(let alarm) = tipping.transition else {
            Issue.record("51 of the last 100 answers suspect should trip")
            return
        }
        #expect(alarm.suspects == 51 && alarm.answers == 100)
    }

    @Test("thresholds are configuration: 5 of 10 within 2 s with share 0.4")
    func configuredThresholds() {
        var breaker = Breaker(configuration: .init(window: .seconds(2), minimumAnswers: 10, share: 0.4))
        _ = feed(&breaker, news, .sane, count: 5)
        let decisions = feed(&breaker, news, .suspect(.project), count: 5, from: 1)
        guard case .tripped(let alarm) = decisions.last?.transition else {
            Issue.record("5 of 10 > 0.4 should trip")
            return
        }
        #expect(alarm.suspicion == .project)
    }

    @Test("while tripped, sending waits for the probe; the probe lets 10 through; sane answers clear the alarm")
    func probeClears() {
        var breaker = Breaker()
        _ = feed(&breaker, news, .suspect(.environment), count: 100)
        #expect(breaker.admit(news, now: at(10)).admission == .hold(until: at(trip + 30)))
        for index in 0..<10 {
            #expect(breaker.admit(news, now: at(31)).admission == .send, "probe \(index)")
        }
        #expect(breaker.admit(news, now: at(31)).admission == .hold(until: at(61)))
        let answers = (0..<10).map { _ in breaker.answered(news, .sane, now: at(31.5)) }
        #expect(answers.dropLast().allSatisfy { $0 == Breaker.Decision(verdict: .proceed, transition: nil) })
        #expect(answers.last?.transition == .cleared(news, since: at(trip)))
        #expect(breaker.alarms.isEmpty)
        #expect(!breaker.isHoldingAny)
        #expect(breaker.admit(news, now: at(31.5)).admission == .send)
    }

    @Test("suspect probe answers trip it again with the back-off doubled, up to the limit; they are held")
    func probeFailsWithBackoff() {
        var breaker = Breaker(configuration: .init(probeAfter: .seconds(30), probeLimit: .seconds(100)))
        _ = feed(&breaker, news, .suspect(.environment), count: 100)
        var now = trip + 30
        for expectedBackoff in [60.0, 100, 100] {
            for _ in 0..<10 { #expect(breaker.admit(news, now: at(now)).admission == .send) }
            let answers = (0..<10).map { _ in breaker.answered(news, .suspect(.environment), now: at(now)) }
            #expect(answers.dropLast().allSatisfy { $0.verdict == .hold(until: at(now + 30)) })
            guard case .probeFailed(let alarm) = answers.last?.transition else {
                Issue.record("expected the probe to fail")
                return
            }
            #expect(alarm.probeAt == at(now + expectedBackoff))
            #expect(alarm.since == at(trip))
            #expect(breaker.admit(news, now: at(now + 1)).admission == .hold(until: at(now + expectedBackoff)))
            now += expectedBackoff
        }
    }

    @Test("a probe round whose answers never come starts again after the window")
    func lostProbeStartsAgain() {
        var breaker = Breaker()
        _ = feed(&breaker, news, .suspect(.environment), count: 100)
        for _ in 0..<10 { _ = breaker.admit(news, now: at(31)) }
        #expect(breaker.admit(news, now: at(90)).admission == .hold(until: at(120)))
        #expect(breaker.admit(news, now: at(91)).admission == .send)
    }

    @Test("a probe round with fewer answers than asked decides on those that came, at the end of the window")
    func shortProbeDecides() {
        var breaker = Breaker()
        _ = feed(&breaker, news, .suspect(.environment), count: 100)
        for _ in 0..<3 { _ = breaker.admit(news, now: at(31)) }
        for _ in 0..<3 { _ = breaker.answered(news, .sane, now: at(31.1)) }
        for _ in 0..<7 { _ = breaker.admit(news, now: at(31.2)) }
        let (admission, transition) = breaker.admit(news, now: at(91.2))
        #expect(admission == .send)
        #expect(transition == .cleared(news, since: at(trip)))
    }

    @Test("one app's trip holds neither another app nor the same app's other service")
    func keysAreIndependent() {
        var breaker = Breaker()
        let weather = Breaker.Key(app: "weather", service: .apns)
        let newsFCM = Breaker.Key(app: "news", service: .fcm)
        _ = feed(&breaker, news, .suspect(.environment), count: 100)
        #expect(breaker.admit(weather, now: at(1)).admission == .send)
        #expect(breaker.admit(newsFCM, now: at(1)).admission == .send)
        #expect(breaker.answered(newsFCM, .sane, now: at(1)).verdict == .proceed)
        #expect(breaker.alarms.map(\.key) == [news])
    }

    @Test("sane answers after a trip proceed; suspect ones are held until the probe")
    func answersWhileTripped() {
        var breaker = Breaker()
        _ = feed(&breaker, news, .suspect(.environment), count: 100)
        #expect(breaker.answered(news, .sane, now: at(1)) == .init(verdict: .proceed, transition: nil))
        #expect(
            breaker.answered(news, .suspect(.topic), now: at(1))
                == .init(verdict: .hold(until: at(trip + 30)), transition: nil)
        )
    }

    @Test("a deferred answer of a sample that tripped and has since cleared is sent again, not invalidated")
    func deferredFromClearedTripIsResent() throws {
        var breaker = Breaker()
        let first = try #require(ticket(breaker.answered(news, .suspect(.environment), now: at(0))))
        _ = feed(&breaker, news, .suspect(.environment), count: 99, from: 1.0 / 1024)
        for _ in 0..<10 { _ = breaker.admit(news, now: at(31)) }
        for _ in 0..<10 { _ = breaker.answered(news, .sane, now: at(31)) }
        #expect(breaker.alarms.isEmpty)
        #expect(breaker.resolve(first, now: at(32)) == .hold(until: at(32)))
    }
}
