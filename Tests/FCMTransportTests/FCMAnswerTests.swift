import Foundation
import NIOCore
import NIOHPACK
import PushgateCore
import Testing

@testable import FCMTransport

@Suite("FCM answers read from their stream")
struct FCMAnswerTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func answer(_ fields: [(String, String)], body: [String]) -> FCMAnswer {
        var answer = FCMAnswer()
        answer.read(HPACKHeaders(fields))
        for part in body { answer.append(ByteBuffer(string: part)) }
        return answer
    }

    @Test("200 with the message name in two DATA frames: accepted, named")
    func accepted() {
        let outcome = answer([(":status", "200")], body: [#"{"name":"projects/p/"#, #"messages/0:1"}"#])
            .outcome(now: now)
        #expect(outcome.outcomeClass == .accepted)
        #expect(outcome.messageName == "projects/p/messages/0:1")
    }

    @Test("429 QUOTA_EXCEEDED with Retry-After: retryable after that many seconds")
    func quotaExceededHonoursRetryAfter() {
        let body =
            #"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"#
            + #""type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"QUOTA_EXCEEDED"}]}}"#
        let outcome = answer([(":status", "429"), ("retry-after", "17")], body: [body]).outcome(now: now)
        #expect(outcome.outcomeClass == .retryable)
        #expect(outcome.errorCode == .quotaExceeded)
        #expect(outcome.retryAfter == .seconds(17))
    }

    @Test("404 UNREGISTERED: rejected and the device invalidated")
    func unregisteredInvalidates() {
        let body =
            #"{"error":{"code":404,"status":"NOT_FOUND","details":[{"@type":"#
            + #""type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}"#
        let outcome = answer([(":status", "404")], body: [body]).outcome(now: now)
        #expect(outcome.outcomeClass == .rejected)
        #expect(outcome.invalidatesDevice)
    }

    @Test("401 without an FCM error code: the access token was refused (refresh once, resend once)")
    func refusedAccessToken() {
        let body = #"{"error":{"code":401,"status":"UNAUTHENTICATED"}}"#
        let outcome = answer([(":status", "401")], body: [body]).outcome(now: now)
        #expect(outcome.accessTokenRejected)
        #expect(outcome.outcomeClass == .retryable)
    }

    @Test("no :status: malformed, a transport failure; an oversized body is cut at the limit")
    func malformedAndBounded() {
        #expect(
            answer([("content-type", "application/json")], body: []).outcome(now: now).transportFailure
                == .malformedResponse("no :status")
        )
        var big = FCMAnswer()
        big.append(ByteBuffer(repeating: 0x20, count: FCMAnswer.maximumBodyBytes - 10))
        big.append(ByteBuffer(repeating: 0x20, count: 100))
        big.append(ByteBuffer(repeating: 0x20, count: 100))
        #expect(big.body?.readableBytes == FCMAnswer.maximumBodyBytes)
    }
}
