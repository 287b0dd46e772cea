import Foundation
import PushgateCore
import Testing

/// Each service's answers in the dispatcher's words (`PushOutcome`): what the ledger, the breaker and the
/// metrics read.
@Suite("PushOutcome: APNs and FCM answers as the dispatcher reads them")
struct PushOutcomeTests {
    static func apns(_ status: Int, _ reason: APNsReason? = nil, apnsID: String? = nil, at: Int64? = nil) -> PushOutcome
    {
        PushOutcome(
            apns: .answered(
                status: status,
                reason: reason,
                apnsID: apnsID,
                apnsUniqueID: nil,
                invalidatedAtMilliseconds: at
            )
        )
    }

    @Test("APNs: 200 delivered with its apns-id; 410 invalidates with Apple's time; other rejections fail")
    func apnsAnswers() {
        let accepted = Self.apns(200, apnsID: "A-1")
        #expect(accepted.verdict == .delivered)
        #expect(accepted.acceptedID == "A-1")
        #expect(accepted.reason == "")
        #expect(accepted.metricsReason == "none")
        #expect(accepted.configurationSignal == .sane)
        let gone = Self.apns(410, .unregistered, at: 1_700_000_000_000)
        #expect(gone.verdict == .invalidate(reason: .unregistered, at: Date(timeIntervalSince1970: 1_700_000_000)))
        #expect(gone.reason == "Unregistered")
        #expect(Self.apns(400, .badDeviceToken).configurationSignal == .suspect(.environment))
        #expect(Self.apns(400, .payloadTooLarge).verdict == .failed)
        #expect(Self.apns(400, .unknown("NewReason")).metricsReason == "unknown")
        #expect(Self.apns(429, .tooManyRequests).verdict == .retry)
        #expect(Self.apns(429, .tooManyRequests).configurationSignal == nil)
        #expect(Self.apns(403, .invalidProviderToken).configurationSignal == .suspect(.credentials))
    }

    @Test("no answer: retried when it never reached the service, failed when it may have (either service)")
    func noAnswer() {
        for failure in [PushTransportFailure.goAway, .streamRefused, .connectFailed("x"), .deadlineExceeded] {
            #expect(PushOutcome(apns: .failed(failure)).verdict == .retry)
            #expect(PushOutcome(fcm: .failed(failure)).verdict == .retry)
        }
        for failure in [PushTransportFailure.answerTimeout, .connectionLost, .streamReset("CANCEL")] {
            #expect(PushOutcome(apns: .failed(failure)).verdict == .failed)
            #expect(PushOutcome(fcm: .failed(failure)).verdict == .failed)
            #expect(PushOutcome(fcm: .failed(failure)).reason == failure.label)
        }
        #expect(PushOutcome(apns: .failed(.cancelled)).failure == .cancelled)
    }

    @Test("a credential refused on every resend: APNs keeps calling it expired_provider_token, a retry")
    func apnsCredentialRefused() {
        let outcome = PushOutcome(apns: .failed(.credentialRefused))
        #expect(outcome.reason == "expired_provider_token")
        #expect(outcome.metricsReason == "expired_provider_token")
        #expect(outcome.verdict == .retry)
    }

    @Test(
        "FCM: an access token refused on every resend is FCM's credential alarm (held, UNAUTHENTICATED), not an APNs token"
    )
    func fcmCredentialRefused() {
        let fcm = FCMOutcome.failed(.credentialRefused)
        #expect(fcm.accessTokenRejected)
        #expect(fcm.isConfigurationAlarm)
        #expect(fcm.transportFailure == nil)
        let outcome = PushOutcome(fcm: fcm)
        #expect(outcome.verdict == .configurationAlarm(held: true))
        #expect(outcome.reason == "UNAUTHENTICATED")
        #expect(outcome.configurationSignal == nil)
    }

    @Test(
        "FCM: UNREGISTERED invalidates as Unregistered; SENDER_ID_MISMATCH fails and is suspect; THIRD_PARTY_AUTH_ERROR fails as an alarm"
    )
    func fcmAnswers() {
        func answered(_ code: String, _ status: Int) -> PushOutcome {
            let body = #"{"error":{"code":\#(status),"message":"m","details":[{"errorCode":"\#(code)"}]}}"#
            return PushOutcome(fcm: .answered(status: status, body: Array(body.utf8), now: Date()))
        }
        #expect(answered("UNREGISTERED", 404).verdict == .invalidate(reason: .unregistered, at: nil))
        let mismatch = answered("SENDER_ID_MISMATCH", 403)
        #expect(mismatch.verdict == .failed)
        #expect(mismatch.configurationSignal == .suspect(.project))
        #expect(answered("THIRD_PARTY_AUTH_ERROR", 401).verdict == .configurationAlarm(held: false))
        #expect(answered("SOMETHING_NEW", 400).metricsReason == "unknown")
        let accepted = PushOutcome(
            fcm: .answered(status: 200, body: Array(#"{"name":"projects/p/messages/1"}"#.utf8), now: Date())
        )
        #expect(accepted.verdict == .delivered)
        #expect(accepted.acceptedID == "projects/p/messages/1")
        #expect(accepted.metricsReason == "none")
    }
}
