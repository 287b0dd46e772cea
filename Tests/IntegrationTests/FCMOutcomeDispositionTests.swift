import Foundation
import PushgateCore
import PushgateDispatch
import Testing

/// What the ledger records for each answer FCM can give: the same three decisions as for APNs.
@Suite("FCM outcome disposition")
struct FCMOutcomeDispositionTests {
    /// Full jitter at its ceiling: the first back-off delay is the base, 1 s.
    struct Ceiling: RandomNumberGenerator {
        mutating func next() -> UInt64 { .max }
    }

    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let token = try! DeviceToken(fcm: "disposition-test:" + String(repeating: "x", count: 40))

    static func request(expiration: Expiration = .storagePolicy) -> NotificationRequest {
        NotificationRequest(
            id: try! RequestID("disposition"),
            groups: ["all"],
            expiration: expiration,
            payload: try! Payload(jsonString: #"{"aps":{"alert":"hi"}}"#),
            createdAt: now
        )
    }

    static func decide(_ outcome: FCMOutcome, expiration: Expiration = .storagePolicy) -> OutcomeDisposition {
        var generator = Ceiling()
        return OutcomeDisposition.decide(
            PushOutcome(fcm: outcome),
            token: token,
            attempt: 1,
            request: request(expiration: expiration),
            policy: RetryPolicy(),
            now: now,
            using: &generator
        )
    }

    static func error(_ code: FCMErrorCode, message: String = "error", retryAfter: String? = nil) -> FCMOutcome {
        ScriptedFCMTransport.error(code, message: message, retryAfter: retryAfter, now: now)
    }

    @Test("accepted keeps the message name where the apns-id goes")
    func accepted() {
        let outcome = FCMOutcome.answered(
            status: 200,
            body: Array(#"{"name":"projects/p/messages/0:42"}"#.utf8),
            now: Self.now
        )
        #expect(Self.decide(outcome) == .accepted(apnsID: "projects/p/messages/0:42"))
    }

    @Test("UNREGISTERED fails the device and invalidates it, as APNs' Unregistered, unconditionally")
    func unregistered() {
        let invalidation = DeviceInvalidation(token: Self.token, reason: .unregistered, appleTimestamp: nil)
        #expect(
            Self.decide(Self.error(.unregistered))
                == .failed(reason: "UNREGISTERED", status: 404, invalidation: invalidation)
        )
    }

    @Test(
        "INVALID_ARGUMENT about the registration token invalidates it as BadDeviceToken; about the message it does not"
    )
    func invalidArgument() {
        let aboutToken = Self.error(
            .invalidArgument,
            message: "The registration token is not a valid FCM registration token"
        )
        let invalidation = DeviceInvalidation(token: Self.token, reason: .badDeviceToken, appleTimestamp: nil)
        #expect(
            Self.decide(aboutToken) == .failed(reason: "INVALID_ARGUMENT", status: 400, invalidation: invalidation)
        )
        let aboutMessage = Self.error(.invalidArgument, message: "Invalid value at 'message.android.ttl'")
        #expect(Self.decide(aboutMessage) == .failed(reason: "INVALID_ARGUMENT", status: 400, invalidation: nil))
    }

    @Test("SENDER_ID_MISMATCH fails the device without pruning it")
    func senderIDMismatch() {
        #expect(
            Self.decide(Self.error(.senderIDMismatch))
                == .failed(reason: "SENDER_ID_MISMATCH", status: 403, invalidation: nil)
        )
    }

    @Test(
        "THIRD_PARTY_AUTH_ERROR, a configuration alarm FCM answers as a rejection, fails, never prunes, never retries"
    )
    func thirdPartyAuthError() {
        let thirdParty = Self.error(.thirdPartyAuthError)
        #expect(thirdParty.isConfigurationAlarm)
        #expect(Self.decide(thirdParty) == .failed(reason: "THIRD_PARTY_AUTH_ERROR", status: 401, invalidation: nil))
    }

    @Test("an access token refused twice holds the device (never pruned) until the request's deadline, then fails")
    func accessTokenRefusedTwiceHolds() {
        let refused = FCMOutcome.answered(status: 401, body: [], now: Self.now)
        #expect(refused.accessTokenRejected && refused.outcomeClass == .retryable && refused.isConfigurationAlarm)
        guard case .retry(let at, let reason) = Self.decide(refused) else {
            Issue.record("not held: \(Self.decide(refused))")
            return
        }
        #expect(reason == "UNAUTHENTICATED")
        #expect(at > Self.now && at <= Self.now.addingTimeInterval(1))
        // A notification whose deadline has passed fails with the alarm's reason.
        let expired = Expiration.at(epochSeconds: Int64(Self.now.timeIntervalSince1970) - 1)
        #expect(
            Self.decide(refused, expiration: expired)
                == .failed(reason: "UNAUTHENTICATED", status: 401, invalidation: nil)
        )
    }

    @Test(
        "credentials the token endpoint refused hold the device until the next fetch, bounded by the deadline, then fail with fcm_credentials_refused"
    )
    func credentialsRefusedHold() {
        let refused = FCMOutcome(
            outcomeClass: .retryable,
            isConfigurationAlarm: true,
            retryAfter: .seconds(30),
            credentialsRefused: true
        )
        #expect(refused.reasonLabel == "fcm_credentials_refused")
        #expect(Self.decide(refused) == .retry(at: Self.now.addingTimeInterval(30), reason: "fcm_credentials_refused"))
        // Never past the deadline: held until it, however far the next fetch.
        let soon = Expiration.at(epochSeconds: Int64(Self.now.timeIntervalSince1970) + 10)
        #expect(
            Self.decide(refused, expiration: soon)
                == .retry(at: Self.now.addingTimeInterval(10), reason: "fcm_credentials_refused")
        )
        let past = Expiration.at(epochSeconds: Int64(Self.now.timeIntervalSince1970))
        #expect(
            Self.decide(refused, expiration: past)
                == .failed(reason: "fcm_credentials_refused", status: nil, invalidation: nil)
        )
    }

    @Test(
        "QUOTA_EXCEEDED, UNAVAILABLE and INTERNAL are retried no earlier than Retry-After",
        arguments: [FCMErrorCode.quotaExceeded, .unavailable, .internal]
    )
    func retryAfterIsHonoured(code: FCMErrorCode) {
        // The back-off alone would retry after 1 s at most.
        #expect(
            Self.decide(Self.error(code, retryAfter: "2"))
                == .retry(at: Self.now.addingTimeInterval(2), reason: code.rawValue)
        )
        #expect(
            Self.decide(Self.error(code, retryAfter: "120"))
                == .retry(at: Self.now.addingTimeInterval(120), reason: code.rawValue)
        )
        // Without Retry-After, or with a shorter one, the back-off decides.
        #expect(Self.decide(Self.error(code)) == .retry(at: Self.now.addingTimeInterval(1), reason: code.rawValue))
        #expect(
            Self.decide(Self.error(code, retryAfter: "0"))
                == .retry(at: Self.now.addingTimeInterval(1), reason: code.rawValue)
        )
    }

    @Test("a Retry-After past the notification's deadline gives up instead of retrying early")
    func retryAfterPastDeadline() {
        // Expiration 0: retried within 60 s of the first attempt only.
        #expect(
            Self.decide(Self.error(.quotaExceeded, retryAfter: "90"), expiration: .immediately)
                == .failed(reason: "QUOTA_EXCEEDED", status: 429, invalidation: nil)
        )
        #expect(
            Self.decide(Self.error(.quotaExceeded, retryAfter: "30"), expiration: .immediately)
                == .retry(at: Self.now.addingTimeInterval(30), reason: "QUOTA_EXCEEDED")
        )
    }

    @Test(
        "no answer to an attempt that never reached FCM is retried with back-off, as for APNs",
        arguments: [
            PushTransportFailure.connectFailed("refused"), .deadlineExceeded, .streamRefused, .goAway, .queueFull,
        ]
    )
    func transportFailure(failure: PushTransportFailure) {
        #expect(
            Self.decide(.failed(failure)) == .retry(at: Self.now.addingTimeInterval(1), reason: failure.label)
        )
    }

    /// Issue #27: FCM may have accepted what it did not answer in time; a resend would deliver it twice.
    @Test(
        "no answer to an attempt that may have reached FCM fails the device for good, never resent nor pruned",
        arguments: [
            PushTransportFailure.answerTimeout, .connectionLost, .streamReset("INTERNAL_ERROR"),
            .malformedResponse("no :status"),
        ]
    )
    func unconfirmedAttempt(failure: PushTransportFailure) {
        #expect(failure.mayHaveReachedService)
        #expect(Self.decide(.failed(failure)) == .failed(reason: failure.label, status: nil, invalidation: nil))
        var generator = Ceiling()
        let apns = OutcomeDisposition.decide(
            PushOutcome(apns: APNsOutcome.failed(failure)),
            token: try! DeviceToken(hex: String(repeating: "ab", count: 32)),
            attempt: 1,
            request: Self.request(),
            policy: RetryPolicy(),
            now: Self.now,
            using: &generator
        )
        #expect(apns == .failed(reason: failure.label, status: nil, invalidation: nil))
    }
}
