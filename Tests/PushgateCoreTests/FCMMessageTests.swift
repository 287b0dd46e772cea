import Foundation
import PushgateCore
import Testing

@Suite("FCM message derivation")
struct FCMMessageTests {
    let createdAt = Date(timeIntervalSince1970: 1_800_000_000)

    func derive(
        _ payload: String,
        pushType: PushType = .alert,
        priority: Priority = .immediate,
        expiration: Expiration = .immediately,
        collapseID: String? = nil,
        override: String? = nil
    ) throws -> [String: Any] {
        let message = try FCMMessage(
            payload: try Payload(jsonString: payload),
            pushType: pushType,
            priority: priority,
            expiration: expiration,
            collapseID: try collapseID.map { try CollapseID($0) },
            createdAt: createdAt,
            override: try override.map { try FCMOverride(jsonBytes: Array($0.utf8)) }
        )
        let body = try #require(jsonObject(Data(message.requestBody(token: "tok-1"))))
        let inner = try #require(body["message"] as? [String: Any])
        #expect(inner["token"] as? String == "tok-1")
        #expect(body.count == 1)
        return inner
    }

    @Test("aps.alert as a string becomes notification.body; custom keys become data, strings as they are")
    func alertString() throws {
        let message = try derive(#"{"aps":{"alert":"Hello","badge":3},"n":1,"s":"x","o":{"a":[true,null]}}"#)
        #expect(message["notification"] as? [String: String] == ["body": "Hello"])
        #expect(message["data"] as? [String: String] == ["n": "1", "s": "x", "o": #"{"a":[true,null]}"#])
        #expect((message["android"] as? [String: Any])?["priority"] as? String == "HIGH")
    }

    @Test("a string data value arrives as written; numbers, booleans, null, objects and arrays as JSON text")
    func dataStringsAsTheyAre() throws {
        let message = try derive(
            #"{"aps":{"alert":"Goal!"},"team":"Lyon","quoted":"\"x\"","empty":"","match":42,"ratio":0.5,"#
                + #""live":true,"none":null,"score":[2,1],"o":{"k":"v"}}"#
        )
        #expect(
            message["data"] as? [String: String] == [
                "team": "Lyon", "quoted": #""x""#, "empty": "", "match": "42", "ratio": "0.5", "live": "true",
                "none": "null", "score": "[2,1]", "o": #"{"k":"v"}"#,
            ]
        )
    }

    @Test("aps.alert with title and body becomes notification title and body")
    func alertObject() throws {
        let message = try derive(#"{"aps":{"alert":{"title":"T","body":"B","subtitle":"S"}}}"#)
        #expect(message["notification"] as? [String: String] == ["title": "T", "body": "B"])
        #expect(message["data"] == nil)
    }

    @Test("priority 5 is NORMAL; background is data-only and NORMAL whatever its alert")
    func priorityAndBackground() throws {
        let normal = try derive(#"{"aps":{"alert":"x"}}"#, priority: .conservePower)
        #expect((normal["android"] as? [String: Any])?["priority"] as? String == "NORMAL")
        let background = try derive(
            #"{"aps":{"content-available":1,"alert":"x"},"k":"v"}"#,
            pushType: .background,
            priority: .conservePower
        )
        #expect(background["notification"] == nil)
        #expect(background["data"] as? [String: String] == ["k": "v"])
        #expect((background["android"] as? [String: Any])?["priority"] as? String == "NORMAL")
    }

    @Test("expiration becomes android.ttl, at most 28 days; key becomes android.collapse_key")
    func ttlAndCollapseKey() throws {
        func android(_ expiration: Expiration, key: String? = nil) throws -> [String: Any] {
            try #require(
                try derive(#"{"aps":{"alert":"x"}}"#, expiration: expiration, collapseID: key)["android"]
                    as? [String: Any]
            )
        }
        #expect(try android(.immediately)["ttl"] as? String == "0s")
        #expect(try android(.at(epochSeconds: 1_800_000_090))["ttl"] as? String == "90s")
        #expect(try android(.at(epochSeconds: 1_700_000_000))["ttl"] as? String == "0s")
        #expect(try android(.at(epochSeconds: 1_900_000_000))["ttl"] as? String == "2419200s")
        #expect(try android(.storagePolicy)["ttl"] == nil)
        #expect(try android(.immediately, key: "score")["collapse_key"] as? String == "score")
    }

    @Test("a stored request's android.ttl is what is left when it is sent, floored at 0; an fcm ttl still wins")
    func ttlAtSendTime() throws {
        func ttl(sentAt: Date?, override: String? = nil) throws -> String? {
            let request = NotificationRequest(
                id: try RequestID("ttl-1"),
                expiration: .at(epochSeconds: 1_800_003_600),
                payload: try Payload(jsonString: #"{"aps":{"alert":"x"}}"#),
                fcm: try override.map { try FCMOverride(jsonBytes: Array($0.utf8)) },
                createdAt: createdAt
            )
            let message = try FCMMessage(request: request, sentAt: sentAt)
            let body = try #require(jsonObject(Data(message.requestBody(token: "tok-1"))))
            let inner = try #require(body["message"] as? [String: Any])
            return (inner["android"] as? [String: Any])?["ttl"] as? String
        }
        #expect(try ttl(sentAt: nil) == "3600s", "the first send: the whole hour")
        #expect(try ttl(sentAt: createdAt) == "3600s")
        #expect(try ttl(sentAt: createdAt.addingTimeInterval(600.7)) == "3000s", "a retry 10 minutes later")
        #expect(try ttl(sentAt: createdAt.addingTimeInterval(3600)) == "0s")
        #expect(try ttl(sentAt: createdAt.addingTimeInterval(4000)) == "0s", "past the expiration: floored at 0")
        #expect(try ttl(sentAt: createdAt.addingTimeInterval(600), override: #"{"android":{"ttl":"60s"}}"#) == "60s")
    }

    @Test("an fcm object overrides the derivation as a merge patch")
    func override() throws {
        let message = try derive(
            #"{"aps":{"alert":"x"},"k":1}"#,
            override: #"{"notification":{"title":"Hi"},"data":{"k":null,"extra":"e"},"android":{"priority":"NORMAL"}}"#
        )
        #expect(message["notification"] as? [String: String] == ["title": "Hi", "body": "x"])
        #expect(message["data"] as? [String: String] == ["extra": "e"])
        #expect((message["android"] as? [String: Any])?["priority"] as? String == "NORMAL")
        #expect((message["android"] as? [String: Any])?["ttl"] as? String == "0s")
    }

    @Test("an fcm object may not set a target nor a non-string data value")
    func overrideRules() {
        #expect(throws: ValidationError(code: .invalidFCMMessage, field: "fcm.token", message: "")) {
            try FCMOverride(jsonBytes: Array(#"{"token":"other"}"#.utf8))
        }
        #expect(throws: ValidationError(code: .invalidFCMMessage, field: "fcm", message: "")) {
            try FCMOverride(jsonBytes: Array("[]".utf8))
        }
        #expect(throws: ValidationError(code: .invalidFCMMessage, field: "fcm.data.n", message: "")) {
            try derive(#"{"aps":{"alert":"x"}}"#, override: #"{"data":{"n":1}}"#)
        }
    }

    @Test("a message over 4,096 bytes is refused naming its biggest field")
    func oversized() throws {
        let big = String(repeating: "a", count: 4100)
        #expect(throws: ValidationError(code: .payloadTooLarge, field: "payload.blob", message: "")) {
            try derive(#"{"aps":{"alert":"x"},"blob":"\#(big)","small":1}"#)
        }
        #expect(throws: ValidationError(code: .payloadTooLarge, field: "payload.aps.alert", message: "")) {
            try derive(#"{"aps":{"alert":"\#(big)x"},"small":"\#(String(repeating: "b", count: 200))"}"#)
        }
        #expect(throws: ValidationError(code: .payloadTooLarge, field: "fcm.data.big", message: "")) {
            try derive(#"{"aps":{"alert":"x"}}"#, override: #"{"data":{"big":"\#(big)\#(big)"}}"#)
        }
        // Just under the limit is fine, and the same request always encodes to the same bytes.
        let payload = try Payload(
            jsonString: #"{"aps":{"alert":"x"},"blob":"\#(String(repeating: "a", count: 3900))"}"#
        )
        let first = try FCMMessage(
            payload: payload,
            pushType: .alert,
            priority: .immediate,
            expiration: .immediately,
            collapseID: nil,
            createdAt: createdAt
        )
        let again = try FCMMessage(
            payload: payload,
            pushType: .alert,
            priority: .immediate,
            expiration: .immediately,
            collapseID: nil,
            createdAt: createdAt
        )
        #expect(first.byteCount <= FCMMessage.maximumBytes)
        #expect(first == again)
    }
}
