import Foundation
import PushgateCore
import Testing
import WebPush

@Suite("Web Push: headers, payload, answers")
struct WebPushHeadersTests {
    let sentAt = Date(timeIntervalSince1970: 1_800_000_000)

    func headers(
        expiration: Expiration = .immediately,
        pushType: PushType = .alert,
        priority: Priority = .immediate,
        key: String? = nil
    ) throws -> WebPushHeaders {
        WebPushHeaders(
            expiration: expiration,
            pushType: pushType,
            priority: priority,
            collapseID: try key.map { try CollapseID($0) },
            sentAt: sentAt
        )
    }

    @Test("TTL: 0 for 'once', the seconds left for a time (floored at 0, capped at 28 days), 28 days otherwise")
    func ttl() throws {
        #expect(try headers(expiration: .immediately).ttl == 0)
        #expect(try headers(expiration: .at(epochSeconds: 1_800_000_600)).ttl == 600)
        #expect(try headers(expiration: .at(epochSeconds: 1_700_000_000)).ttl == 0)
        #expect(try headers(expiration: .at(epochSeconds: 1_900_000_000)).ttl == 2_419_200)
        #expect(try headers(expiration: .storagePolicy).ttl == 2_419_200)
    }

    @Test("Urgency: pushd's urgent → high, normal → normal, background → low, priority 1 → very-low")
    func urgency() throws {
        for type in PushdNotificationType.allCases {
            let expected: WebPushUrgency = [.urgent: .high, .normal: .normal, .background: .low][type]!
            #expect(try headers(pushType: type.pushType, priority: type.priority).urgency == expected)
        }
        #expect(try headers(pushType: .alert, priority: .powerSaving).urgency == .veryLow)
    }

    @Test("Topic: a base64url key of up to 32 characters as it is; any other key hashed to 32 characters")
    func topic() throws {
        #expect(try headers().topic == nil)
        #expect(try headers(key: "score-update_7").topic == "score-update_7")
        let long = try headers(key: String(repeating: "a", count: 33)).topic
        let spaced = try headers(key: "match 7: score").topic
        for topic in [long, spaced] {
            #expect(topic?.count == 32)
            #expect(topic?.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" } == true)
        }
        #expect(try headers(key: "match 7: score").topic == spaced)  // the same key, the same topic
        #expect(long != spaced)
        let fields = try headers(expiration: .at(epochSeconds: 1_800_000_060), key: "k").fields
        #expect(fields.map(\.name) == ["ttl", "urgency", "content-encoding", "content-type", "topic"])
        #expect(fields.map(\.value) == ["60", "high", "aes128gcm", "application/octet-stream", "k"])
    }

    @Test("payload: the request's payload as written by default; a webpush object merges over it")
    func payload() throws {
        let written = #"{ "aps": {"alert": "Goal"}, "team": "Lyon", "n": 2 }"#
        let payload = try Payload(jsonString: written)
        #expect(try WebPushMessage(payload: payload).plaintext == Array(written.utf8))
        let override = try WebPushOverride(jsonBytes: Array(#"{"aps":null,"title":"Goal!","n":3}"#.utf8))
        let merged = try WebPushMessage(payload: payload, override: override)
        #expect(String(decoding: merged.plaintext, as: UTF8.self) == #"{"n":3,"team":"Lyon","title":"Goal!"}"#)
        #expect(throws: ValidationError(code: .invalidWebPushMessage, field: "webpush", message: "")) {
            try WebPushOverride(jsonBytes: Array("[1]".utf8))
        }
    }

    @Test("a message over 3,993 bytes is refused naming its largest member")
    func payloadSize() throws {
        let big = String(repeating: "x", count: 4000)
        let payload = try Payload(jsonString: #"{"aps":{"alert":"a"},"blob":"\#(big)"}"#)
        #expect(throws: ValidationError(code: .payloadTooLarge, field: "payload.blob", message: "")) {
            try WebPushMessage(payload: payload)
        }
        let small = try Payload(jsonString: #"{"aps":{"alert":"a"}}"#)
        let override = try WebPushOverride(jsonBytes: Array(#"{"extra":"\#(big)"}"#.utf8))
        #expect(throws: ValidationError(code: .payloadTooLarge, field: "webpush.extra", message: "")) {
            try WebPushMessage(payload: small, override: override)
        }
        let fits = try Payload(jsonString: #"{"b":"\#(String(repeating: "x", count: 3993 - 8))"}"#)
        #expect(try WebPushMessage(payload: fits).plaintext.count == 3993)
    }

    @Test("answers: 201 delivered; 404/410 invalidate; 400/413 fail; 429/5xx retry with Retry-After; 401/403 alarm")
    func answers() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(WebPushAnswer.classify(status: 201, now: now) == .delivered)
        #expect(WebPushAnswer.classify(status: 404, now: now) == .invalidateSubscription(status: 404))
        #expect(WebPushAnswer.classify(status: 410, now: now) == .invalidateSubscription(status: 410))
        #expect(WebPushAnswer.classify(status: 400, now: now) == .failMessage(status: 400))
        #expect(WebPushAnswer.classify(status: 413, now: now) == .failMessage(status: 413))
        #expect(
            WebPushAnswer.classify(status: 429, retryAfter: "30", now: now) == .retry(status: 429, after: .seconds(30))
        )
        #expect(
            WebPushAnswer.classify(status: 503, retryAfter: "Fri, 15 Jan 2027 08:00:30 GMT", now: now)
                == .retry(status: 503, after: .seconds(30))
        )
        #expect(WebPushAnswer.classify(status: 500, now: now) == .retry(status: 500, after: nil))
        #expect(WebPushAnswer.classify(status: 429, retryAfter: "soon", now: now) == .retry(status: 429, after: nil))
        #expect(WebPushAnswer.classify(status: 401, now: now) == .configurationAlarm(status: 401))
        #expect(WebPushAnswer.classify(status: 403, now: now) == .configurationAlarm(status: 403))
        #expect(WebPushAnswer.classify(status: 301, now: now) == .failMessage(status: 301))
    }
}
