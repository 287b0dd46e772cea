import APNsHTTP2
import Foundation
import PushgateCore
import Testing

@testable import PushgateDispatch

/// A revoked APNs key makes Apple answer `InvalidProviderToken` to every request: a storm of it is the
/// app's configuration, judged by the misconfiguration breaker as wrong environments and projects are, so
/// that its devices are held instead of failed. A token we could not sign ourselves is local, and fails.
@Suite("APNs InvalidProviderToken storms hold the devices")
struct ProviderTokenStormTests {
    @Test("Apple's InvalidProviderToken is a suspect answer (credentials); a token we could not sign is not judged")
    func invalidProviderTokenIsSuspect() {
        let refused = APNsOutcome.answered(
            status: 403,
            reason: .invalidProviderToken,
            apnsID: nil,
            apnsUniqueID: nil,
            invalidatedAtMilliseconds: nil
        )
        #expect(MisconfigurationMonitor.answer(PushOutcome(apns: refused)) == .suspect(.credentials))
        let unsigned = APNsOutcome(
            outcomeClass: .rejected,
            reason: .invalidProviderToken,
            transportFailure: .malformedResponse("provider token could not be signed")
        )
        #expect(MisconfigurationMonitor.answer(PushOutcome(apns: unsigned)) == nil)
    }

    @Test("100 InvalidProviderToken answers within a minute trip the breaker: the alarm names the key, devices held")
    func stormTrips() {
        var breaker = MisconfigurationBreaker()
        let key = MisconfigurationBreaker.Key(app: "news", service: .apns)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        var last: MisconfigurationBreaker.Decision?
        for index in 0..<100 {
            last = breaker.answered(key, .suspect(.credentials), now: start.addingTimeInterval(Double(index) * 0.1))
        }
        guard case .tripped(let alarm)? = last?.transition else {
            Issue.record("not tripped: \(String(describing: last))")
            return
        }
        #expect(alarm.suspicion == .credentials)
        #expect(alarm.summary.contains("refuse the provider token"))
        #expect(alarm.summary.contains("key id and team id"))
        if case .hold = last?.verdict {} else { Issue.record("the tripping answer is not held") }
    }
}
