import Foundation
import PushgateCore
import Testing

@Suite("FCM outcomes")
struct FCMOutcomeTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func errorBody(_ code: String?, status: String, message: String = "x") -> [UInt8] {
        var details = ""
        if let code {
            details =
                #","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(code)"}]"#
        }
        return Array(#"{"error":{"code":400,"message":"\#(message)","status":"\#(status)"\#(details)}}"#.utf8)
    }

    @Test("200 is accepted with the message name")
    func accepted() {
        let outcome = FCMOutcome.answered(
            status: 200,
            body: Array(#"{"name":"projects/p/messages/0:123"}"#.utf8),
            now: now
        )
        #expect(outcome.isAccepted)
        #expect(outcome.messageName == "projects/p/messages/0:123")
        #expect(!outcome.invalidatesDevice)
    }

    @Test(
        "every documented code has its status, outcome class, invalidation and alarm",
        arguments: [
            (FCMErrorCode.unregistered, 404, OutcomeClass.rejected, true, false),
            (.senderIDMismatch, 403, .rejected, false, false),
            (.thirdPartyAuthError, 401, .rejected, false, true),
            (.quotaExceeded, 429, .retryable, false, false),
            (.unavailable, 503, .retryable, false, false),
            (.internal, 500, .retryable, false, false),
            (.invalidArgument, 400, .rejected, false, false),
        ]
    )
    func table(code: FCMErrorCode, status: Int, outcomeClass: OutcomeClass, invalidates: Bool, alarm: Bool) {
        #expect(code.status == status)
        #expect(FCMErrorCode(rawValue: code.rawValue) == code)
        let outcome = FCMOutcome.answered(
            status: status,
            body: errorBody(code.rawValue, status: code.canonicalStatus),
            now: now
        )
        #expect(outcome.errorCode == code)
        #expect(outcome.outcomeClass == outcomeClass)
        #expect(outcome.invalidatesDevice == invalidates)
        #expect(outcome.isConfigurationAlarm == alarm)
        #expect(!outcome.accessTokenRejected)
        #expect(outcome.reasonLabel == code.rawValue)
    }

    @Test("INVALID_ARGUMENT invalidates only when the message is about the registration token")
    func invalidArgument() {
        let aboutToken = FCMOutcome.answered(
            status: 400,
            body: errorBody(
                "INVALID_ARGUMENT",
                status: "INVALID_ARGUMENT",
                message: "The registration token is not a valid FCM registration token"
            ),
            now: now
        )
        #expect(aboutToken.invalidatesDevice)
        #expect(aboutToken.outcomeClass == .rejected)
        let aboutMessage = FCMOutcome.answered(
            status: 400,
            body: errorBody(
                "INVALID_ARGUMENT",
                status: "INVALID_ARGUMENT",
                message: "Invalid value at 'message.data[0].value' (TYPE_STRING), 1"
            ),
            now: now
        )
        #expect(!aboutMessage.invalidatesDevice)
        #expect(aboutMessage.outcomeClass == .rejected)
    }

    @Test("401 without an FCM code is a refused access token: refresh, retry, never prune")
    func unauthenticated() {
        let outcome = FCMOutcome.answered(
            status: 401,
            body: errorBody(nil, status: "UNAUTHENTICATED"),
            now: now
        )
        #expect(outcome.accessTokenRejected)
        #expect(outcome.outcomeClass == .retryable)
        #expect(!outcome.invalidatesDevice)
        #expect(outcome.reasonLabel == "UNAUTHENTICATED")
    }

    @Test("Retry-After is honoured in seconds and as an HTTP date")
    func retryAfter() {
        let body = errorBody("QUOTA_EXCEEDED", status: "RESOURCE_EXHAUSTED")
        #expect(FCMOutcome.answered(status: 429, body: body, retryAfter: "2", now: now).retryAfter == .seconds(2))
        // 1_800_000_000 is Fri, 15 Jan 2027 08:00:00 GMT.
        let date = FCMOutcome.answered(status: 503, body: [], retryAfter: "Fri, 15 Jan 2027 08:00:30 GMT", now: now)
        #expect(date.retryAfter == .seconds(30))
        #expect(date.outcomeClass == .retryable)
        #expect(FCMOutcome.answered(status: 429, body: body, retryAfter: "soon", now: now).retryAfter == nil)
    }

    @Test("unknown codes are classed by status; no answer is classed as for APNs")
    func unknownAndFailures() {
        let later = FCMOutcome.answered(status: 502, body: errorBody("SOMETHING_NEW", status: "UNKNOWN"), now: now)
        #expect(later.errorCode == .unknown("SOMETHING_NEW"))
        #expect(later.outcomeClass == .retryable)
        #expect(FCMOutcome.answered(status: 400, body: Array("not json".utf8), now: now).outcomeClass == .rejected)
        #expect(FCMOutcome.failed(.goAway).outcomeClass == .connectionFatal)
        #expect(FCMOutcome.failed(.deadlineExceeded).outcomeClass == .retryable)
    }
}
