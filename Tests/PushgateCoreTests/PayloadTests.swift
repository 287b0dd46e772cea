import Foundation
import PushgateCore
import Testing

/// A JSON object of exactly `size` bytes.
func jsonObject(ofSize size: Int) -> String {
    let frame = #"{"aps":{},"p":""}"#
    return #"{"aps":{},"p":""# + String(repeating: "x", count: size - frame.utf8.count) + #""}"#
}

@Suite("Payloads")
struct PayloadTests {
    @Test("the size helper makes objects of the exact size")
    func helper() {
        #expect(jsonObject(ofSize: 4096).utf8.count == 4096)
    }

    @Test("a 4096-byte payload is within the limit of every push type but VoIP's larger one")
    func exactlyAtTheLimit() throws {
        let payload = try Payload(jsonString: jsonObject(ofSize: 4096))
        for pushType in PushType.allCases { try payload.validate(for: pushType) }
    }

    @Test("a 4097-byte payload is refused for every push type but VoIP")
    func oneOverTheLimit() throws {
        let payload = try Payload(jsonString: jsonObject(ofSize: 4097))
        for pushType in PushType.allCases where pushType != .voip {
            #expect(throws: ValidationError(code: .payloadTooLarge, field: "payload", message: "")) {
                try payload.validate(for: pushType)
            }
        }
        try payload.validate(for: .voip)
    }

    @Test("VoIP payloads may be 5120 bytes; 5121 are refused outright")
    func voipLimit() throws {
        try Payload(jsonString: jsonObject(ofSize: 5120)).validate(for: .voip)
        #expect(throws: ValidationError(code: .payloadTooLarge, field: "payload", message: "")) {
            try Payload(jsonString: jsonObject(ofSize: 5121))
        }
    }

    @Test("payloads must be non-empty JSON objects")
    func mustBeJSONObjects() throws {
        #expect(throws: ValidationError(code: .payloadEmpty, field: "payload", message: "")) {
            try Payload(jsonString: "")
        }
        for bad in ["[]", "\"aps\"", "42", "{", "{\"aps\":}", "null"] {
            #expect(throws: ValidationError(code: .invalidPayload, field: "payload", message: "")) {
                try Payload(jsonString: bad)
            }
        }
        #expect(try Payload(jsonString: #"{"aps":{"alert":"hi"}}"#).count == 22)
    }

    @Test(
        "an alert payload escapes its text as a JSON string",
        arguments: ["hello", "quote \" and \\ backslash", "line\nbreak\ttab\r", "bell \u{7} nul \u{0}", "émoji 🎉"]
    )
    func alertEscaping(text: String) throws {
        let payload = Payload.alert(text)
        _ = try Payload(jsonBytes: payload.bytes)
        let object = try JSONSerialization.jsonObject(with: Data(payload.bytes)) as? [String: [String: String]]
        #expect(object?["aps"]?["alert"] == text)
    }
}

@Suite("Notification content")
struct NotificationContentTests {
    let topic = try! Topic("com.example.app")

    private func headers(_ content: NotificationContent) -> [String: String] {
        Dictionary(uniqueKeysWithValues: content.headerFields.map { ($0.name, $0.value) })
    }

    @Test("an alert carries push type, topic, priority, expiration and content type, in that order")
    func alertHeaders() throws {
        let content = try NotificationContent(
            topic: topic,
            pushType: .alert,
            priority: .immediate,
            payload: .alert("hi")
        )
        #expect(
            content.headerFields.map(\.name) == [
                "apns-push-type", "apns-topic", "apns-priority", "apns-expiration", "content-type",
            ]
        )
        #expect(
            headers(content) == [
                "apns-push-type": "alert", "apns-topic": "com.example.app", "apns-priority": "10",
                "apns-expiration": "0",
                "content-type": "application/json",
            ]
        )
    }

    @Test("the topic carries the push type's suffix", arguments: PushTypeTests.topicSuffixes)
    func topicSuffix(pushType: PushType, suffix: String) throws {
        let priority: Priority = pushType == .background ? .conservePower : .immediate
        let content = try NotificationContent(
            topic: topic,
            pushType: pushType,
            priority: priority,
            payload: .alert("x")
        )
        #expect(headers(content)["apns-topic"] == "com.example.app" + suffix)
        #expect(headers(content)["apns-push-type"] == pushType.rawValue)
    }

    @Test("the expiration header is omitted for the storage policy and sent otherwise")
    func expirationHeader() throws {
        let stored = try NotificationContent(
            topic: topic,
            pushType: .alert,
            priority: .immediate,
            expiration: .storagePolicy,
            payload: .alert("x")
        )
        #expect(headers(stored)["apns-expiration"] == nil)
        let timed = try NotificationContent(
            topic: topic,
            pushType: .alert,
            priority: .immediate,
            expiration: .at(epochSeconds: 1_800_000_000),
            payload: .alert("x")
        )
        #expect(headers(timed)["apns-expiration"] == "1800000000")
    }

    @Test("the collapse id header is present only when one is set")
    func collapseIDHeader() throws {
        let without = try NotificationContent(
            topic: topic,
            pushType: .alert,
            priority: .immediate,
            payload: .alert("x")
        )
        #expect(headers(without)["apns-collapse-id"] == nil)
        let with = try NotificationContent(
            topic: topic,
            pushType: .alert,
            priority: .immediate,
            collapseID: CollapseID("score"),
            payload: .alert("x")
        )
        #expect(headers(with)["apns-collapse-id"] == "score")
    }

    @Test("a background notification with priority 10 is refused")
    func backgroundPriority() throws {
        #expect(throws: ValidationError(code: .invalidPriority, field: "priority", message: "")) {
            try NotificationContent(topic: topic, pushType: .background, priority: .immediate, payload: .alert("x"))
        }
        let background = try NotificationContent(
            topic: topic,
            pushType: .background,
            priority: .conservePower,
            payload: Payload(jsonString: #"{"aps":{"content-available":1}}"#)
        )
        #expect(headers(background)["apns-priority"] == "5")
    }

    @Test("the payload limit of the push type is checked")
    func payloadLimit() throws {
        let big = try Payload(jsonString: jsonObject(ofSize: 4097))
        #expect(throws: ValidationError(code: .payloadTooLarge, field: "payload", message: "")) {
            try NotificationContent(topic: topic, pushType: .alert, priority: .immediate, payload: big)
        }
        _ = try NotificationContent(topic: topic, pushType: .voip, priority: .immediate, payload: big)
    }
}
