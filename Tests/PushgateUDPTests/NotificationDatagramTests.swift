import Foundation
import PushgateCore
import PushgateUDP
import Testing

@Suite("Notification datagram")
struct NotificationDatagramTests {
    static let token = "be6406fe9e686c11f999c9d47e33b41be56be48f0c77570423bb89f5b51cf127"
    static let other = "0011223344556677"
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let id = try! RequestID("req-1")

    private func parse(_ text: String) throws(ValidationError) -> NotificationRequest {
        try NotificationDatagram.parse(Array(text.utf8), id: Self.id, receivedAt: Self.now)
    }

    @Test("the C pushd README's notification: urgent alert to one group")
    func readmeExample() throws {
        let request = try parse(
            #"{"groups": ["Choom"], "type": "urgent", "payload": {"aps": {"alert": "Hello world!"}}}"#
        )
        #expect(
            request
                == NotificationRequest(
                    id: Self.id,
                    app: "default",
                    groups: ["Choom"],
                    devices: [],
                    pushType: .alert,
                    priority: .immediate,
                    expiration: .immediately,
                    collapseID: nil,
                    payload: try Payload(jsonString: #"{"aps": {"alert": "Hello world!"}}"#),
                    createdAt: Self.now
                )
        )
    }

    @Test(
        "maps type to push type and priority as the C pushd does",
        arguments: [
            (nil, PushType.background, Priority.conservePower),
            ("background", .background, .conservePower),
            ("normal", .alert, .conservePower),
            ("urgent", .alert, .immediate),
        ] as [(String?, PushType, Priority)]
    )
    func typeMapping(type: String?, pushType: PushType, priority: Priority) throws {
        let typeMember = type.map { #""type": "\#($0)", "# } ?? ""
        let request = try parse(#"{\#(typeMember)"groups": ["g"], "payload": {}}"#)
        #expect(request.pushType == pushType)
        #expect(request.priority == priority)
        #expect(request.expiration == .immediately)
        #expect(request.collapseID == nil)
    }

    @Test("every field and extension")
    func everyField() throws {
        let request = try parse(
            """
            {"groups": ["a", "b", "a"], "devices": ["\(Self.token.uppercased())", "\(Self.other)", "\(Self.token)"],
             "type": "normal", "expiration": 1900000000, "key": "coalesce-me", "app": "shop",
             "push_type": "voip", "priority": 10, "payload": {"aps": {"alert": "x"}}}
            """
        )
        #expect(request.id == Self.id)
        #expect(request.createdAt == Self.now)
        #expect(request.app == "shop")
        #expect(request.groups == ["a", "b"])  // duplicates dropped, order kept
        #expect(request.devices == [try DeviceToken(hex: Self.token), try DeviceToken(hex: Self.other)])
        #expect(request.pushType == .voip)
        #expect(request.priority == .immediate)
        #expect(request.expiration == .at(epochSeconds: 1_900_000_000))
        #expect(request.collapseID == (try CollapseID("coalesce-me")))
        #expect(request.payload.bytes == Array(#"{"aps": {"alert": "x"}}"#.utf8))
    }

    @Test("devices alone are enough targets; groups may then be empty")
    func devicesOnly() throws {
        #expect(try parse(#"{"devices": ["\#(Self.token)"], "payload": {}}"#).groups == [])
        #expect(try parse(#"{"groups": [], "devices": ["\#(Self.token)"], "payload": {}}"#).devices.count == 1)
    }

    @Test("every push type is accepted in push_type, with the priority type implies unless given")
    func pushTypes() throws {
        for pushType in PushType.allCases {
            let request = try parse(#"{"groups": ["g"], "type": "normal", "push_type": "\#(pushType)", "payload": {}}"#)
            #expect(request.pushType == pushType)
            #expect(request.priority == .conservePower)
        }
        let alert = try parse(#"{"groups": ["g"], "push_type": "alert", "priority": 1, "payload": {}}"#)
        #expect(alert.priority == .powerSaving)
        let background = try parse(#"{"groups": ["g"], "push_type": "background", "priority": 5, "payload": {}}"#)
        #expect(background.priority == .conservePower)
    }

    @Test(
        "keeps the payload's bytes as sent: numbers, escapes, whitespace, big integers",
        arguments: [
            #"{"a":0.1}"#,
            #"{"a": 1e3, "b": -0.0, "c": 12345678901234567890, "d": 1.0E-7}"#,
            #"{"aps":{"alert":"caf\u00e9 \ud83d\ude00 \"q\" \/"}}"#,
            "{ \"aps\" :\n\t{ \"alert\" : \"été 😀\" } , \"x\" : [ ] , \"y\" : { } }",
        ]
    )
    func payloadBytesPreserved(payload: String) throws {
        let request = try parse(#"{"groups": ["g"], "payload": \#(payload), "type": "normal"}"#)
        #expect(request.payload.bytes == Array(payload.utf8))
    }

    @Test("payload size: 4096 bytes is the limit, 5120 for voip")
    func payloadLimits() throws {
        func payload(ofSize size: Int) -> String {
            let filler = String(repeating: "x", count: size - #"{"p":""}"#.utf8.count)
            return #"{"p":"\#(filler)"}"#
        }
        #expect(try parse(#"{"groups": ["g"], "payload": \#(payload(ofSize: 4096))}"#).payload.count == 4096)
        #expect(
            try parse(
                #"{"groups": ["g"], "push_type": "voip", "type": "urgent", "payload": \#(payload(ofSize: 5120))}"#
            )
            .payload.count == 5120
        )
        #expect(throws: ValidationError(code: .payloadTooLarge, field: "payload", message: "")) {
            try parse(#"{"groups": ["g"], "payload": \#(payload(ofSize: 4097))}"#)
        }
        #expect(throws: ValidationError(code: .payloadTooLarge, field: "payload", message: "")) {
            try parse(#"{"groups": ["g"], "push_type": "voip", "payload": \#(payload(ofSize: 5121))}"#)
        }
    }

    static let rejections: [(String, ValidationError.Code, String)] = [
        // JSON and shape
        ("", .malformedJSON, "datagram"),
        (#"{"groups": ["g"], "payload": {"#, .malformedJSON, "payload"),
        (#"{"groups": ["g"], "payload": {}} {}"#, .malformedJSON, "datagram"),
        (#"{"groups": ["g"], "payload": {"a": NaN}}"#, .malformedJSON, "payload"),
        (#"[{"groups": ["g"], "payload": {}}]"#, .notAnObject, "datagram"),
        (#"null"#, .notAnObject, "datagram"),
        (#"{"groups": ["g"], "groups": ["h"], "payload": {}}"#, .duplicateKey, "groups"),
        (#"{"groups": ["g"], "payload": {"aps": {}, "aps": {}}}"#, .duplicateKey, "payload"),
        ("{\"groups\": [\"g\"], \"payload\": \(String(repeating: "[", count: 70))}", .nestingTooDeep, "payload"),
        // unknown keys: rejected, not half-applied (C pushd B7)
        (#"{"groups": ["g"], "payload": {}, "bogus": 1}"#, .unknownKey, "bogus"),
        (#"{"group": "g", "payload": {}}"#, .unknownKey, "group"),
        (#"{"Groups": ["g"], "payload": {}}"#, .unknownKey, "Groups"),
        // wrong JSON types (the C pushd silently ignored them)
        (#"{"groups": "g", "payload": {}}"#, .wrongType, "groups"),
        (#"{"groups": ["g", 1], "payload": {}}"#, .wrongType, "groups"),
        (#"{"groups": [["g"]], "payload": {}}"#, .wrongType, "groups"),
        (#"{"groups": ["g"], "devices": "ab", "payload": {}}"#, .wrongType, "devices"),
        (#"{"groups": ["g"], "type": 1, "payload": {}}"#, .wrongType, "type"),
        (#"{"groups": ["g"], "expiration": "1", "payload": {}}"#, .wrongType, "expiration"),
        (#"{"groups": ["g"], "expiration": 1.5, "payload": {}}"#, .wrongType, "expiration"),
        (#"{"groups": ["g"], "expiration": 1.0, "payload": {}}"#, .wrongType, "expiration"),
        (#"{"groups": ["g"], "expiration": 1e9, "payload": {}}"#, .wrongType, "expiration"),
        (#"{"groups": ["g"], "expiration": true, "payload": {}}"#, .wrongType, "expiration"),
        (#"{"groups": ["g"], "expiration": null, "payload": {}}"#, .wrongType, "expiration"),
        (#"{"groups": ["g"], "key": 5, "payload": {}}"#, .wrongType, "key"),
        (#"{"groups": ["g"], "priority": "10", "type": "urgent", "payload": {}}"#, .wrongType, "priority"),
        (#"{"groups": ["g"], "priority": true, "payload": {}}"#, .wrongType, "priority"),
        (#"{"groups": ["g"], "push_type": ["alert"], "payload": {}}"#, .wrongType, "push_type"),
        (#"{"groups": ["g"], "app": {}, "payload": {}}"#, .wrongType, "app"),
        (#"{"groups": ["g"], "payload": []}"#, .wrongType, "payload"),
        (#"{"groups": ["g"], "payload": "{}"}"#, .wrongType, "payload"),
        (#"{"groups": ["g"], "payload": null}"#, .wrongType, "payload"),
        // values
        (#"{"groups": ["g"], "type": "loud", "payload": {}}"#, .unknownType, "type"),
        (#"{"groups": ["g"], "type": "Urgent", "payload": {}}"#, .unknownType, "type"),
        (#"{"groups": ["g"], "push_type": "sms", "payload": {}}"#, .invalidPushType, "push_type"),
        (#"{"groups": ["g"], "type": "urgent", "priority": 7, "payload": {}}"#, .invalidPriority, "priority"),
        (#"{"groups": ["g"], "type": "urgent", "priority": 4294967306, "payload": {}}"#, .invalidPriority, "priority"),
        (#"{"groups": ["g"], "priority": 10, "payload": {}}"#, .invalidPriority, "priority"),
        (#"{"groups": ["g"], "type": "urgent", "push_type": "background", "payload": {}}"#, .invalidPriority, "type"),
        (#"{"groups": ["g"], "expiration": -1, "payload": {}}"#, .invalidExpiration, "expiration"),
        (#"{"groups": ["g"], "expiration": 1900000000000, "payload": {}}"#, .invalidExpiration, "expiration"),
        (#"{"groups": ["g"], "expiration": 9223372036854775808, "payload": {}}"#, .integerOutOfRange, "expiration"),
        (#"{"groups": ["g"], "expiration": -9223372036854775809, "payload": {}}"#, .integerOutOfRange, "expiration"),
        (#"{"groups": ["g"], "priority": 100000000000000000000, "payload": {}}"#, .integerOutOfRange, "priority"),
        (
            "{\"groups\": [\"g\"], \"key\": \"\(String(repeating: "k", count: 65))\", \"payload\": {}}",
            .invalidCollapseID, "key"
        ),
        (
            "{\"groups\": [\"g\"], \"key\": \"\(String(repeating: "é", count: 33))\", \"payload\": {}}",
            .invalidCollapseID, "key"
        ),
        (#"{"groups": ["g"], "key": "", "payload": {}}"#, .invalidCollapseID, "key"),
        (#"{"groups": ["g"], "devices": ["xyz"], "payload": {}}"#, .invalidToken, "devices"),
        (#"{"groups": ["g"], "devices": ["\#(token)", "abc"], "payload": {}}"#, .invalidToken, "devices"),
        (#"{"groups": [""], "payload": {}}"#, .invalidGroup, "groups"),
        (#"{"groups": ["ok", "bad\u0007"], "payload": {}}"#, .invalidGroup, "groups"),
        ("{\"groups\": [\"\(String(repeating: "g", count: 256))\"], \"payload\": {}}", .invalidGroup, "groups"),
        (#"{"groups": ["g"], "app": "", "payload": {}}"#, .invalidApp, "app"),
        (#"{"groups": [], "payload": {}}"#, .noTargets, "groups"),
        (#"{"groups": [], "devices": [], "payload": {}}"#, .noTargets, "groups"),
        (#"{"payload": {}}"#, .noTargets, "groups"),
        (#"{"groups": ["g"]}"#, .missingField, "payload"),
        (#"{"groups": ["g"], "type": "urgent"}"#, .missingField, "payload"),
    ]

    @Test("rejects the whole datagram, naming the field and the problem", arguments: rejections)
    func rejection(datagram: String, code: ValidationError.Code, field: String) {
        do {
            let request = try parse(datagram)
            Issue.record("accepted \(datagram.debugDescription) as \(request)")
        } catch {
            #expect(error.code == code, "\(datagram.debugDescription): \(error)")
            #expect(error.field == field, "\(datagram.debugDescription): \(error)")
            #expect(!error.message.isEmpty)
        }
    }

    @Test("the C pushd's crashers and half-applied requests are plain rejections (B3, B4, B6, B7)")
    func pushdBugs() throws {
        // B6: an empty payload object is sent as "{}", not "{".
        #expect(try parse(#"{"groups": ["g"], "payload": {}}"#).payload.bytes == Array("{}".utf8))
        #expect(
            try parse(#"{"groups": ["g"], "payload": {"aps": {}, "x": 1}, "type": "urgent"}"#).payload.bytes
                == Array(#"{"aps": {}, "x": 1}"#.utf8)
        )
        // B3/B4: no payload, then truncated JSON, then a good request: each stands alone.
        #expect(throws: ValidationError.self) { try parse(#"{"groups": ["g"]}"#) }
        #expect(throws: ValidationError.self) { try parse(#"{"groups": ["g"], "payload": {"a":"#) }
        #expect(throws: Never.self) { try parse(#"{"groups": ["g"], "payload": {"a": 1}}"#) }
    }
}
