import Foundation
import PushgateCore
import Testing
import WebPush
import WebPushTransport

@Suite("Web Push: answers in the dispatcher's words (PushOutcome(webPush:))")
struct WebPushOutcomeTests {
    func outcome(_ status: Int, retryAfter: String? = nil) -> PushOutcome {
        PushOutcome(webPush: .answered(WebPushAnswer.classify(status: status, retryAfter: retryAfter, now: Date())))
    }

    @Test("201 is delivered")
    func delivered() {
        let delivered = outcome(201)
        #expect(delivered.verdict == .delivered && delivered.outcomeClass == .accepted)
        #expect(delivered.service == .webpush && delivered.reason.isEmpty && delivered.metricsReason == "none")
    }

    @Test("404 and 410 invalidate the subscription, as unregistered")
    func invalidate() {
        for status in [404, 410] {
            let gone = outcome(status)
            #expect(gone.verdict == .invalidate(reason: .unregistered, at: nil))
            #expect(gone.status == status && gone.reason == "webpush_\(status)")
        }
    }

    @Test("400 and 413 fail the message, not the subscription")
    func failMessage() {
        for status in [400, 413] {
            let failed = outcome(status)
            #expect(failed.verdict == .failed && failed.outcomeClass == .rejected)
            #expect(!failed.isConfigurationAlarm)
        }
    }

    @Test("429 and 5xx retry, no earlier than Retry-After")
    func retry() {
        let throttled = outcome(429, retryAfter: "7")
        #expect(throttled.verdict == .retry && throttled.outcomeClass == .retryable)
        #expect(throttled.notBefore == .seconds(7))
        let unavailable = outcome(503)
        #expect(unavailable.verdict == .retry && unavailable.notBefore == nil)
    }

    @Test("401 and 403 are a configuration alarm, never an invalidation")
    func alarm() {
        for status in [401, 403] {
            let refused = outcome(status)
            #expect(refused.isConfigurationAlarm)
            #expect(refused.verdict == .configurationAlarm(held: false))
        }
    }

    @Test("no answer: sent again when it never reached the service, failed when it may have")
    func noAnswer() {
        let refused = PushOutcome(webPush: .failed(.connectFailed("refused")))
        #expect(refused.verdict == .retry && refused.outcomeClass == .connectionFatal && refused.status == nil)
        let lost = PushOutcome(webPush: .failed(.connectionLost))
        #expect(lost.verdict == .failed && lost.failure == .connectionLost)
    }

    @Test("metrics reasons are bounded: an undocumented status is unknown")
    func boundedReasons() {
        #expect(outcome(418).metricsReason == "unknown")
        #expect(outcome(413).metricsReason == "webpush_413")
    }
}
