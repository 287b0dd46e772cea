import PushgateCore
import Testing

@Suite("Push types, priorities and topics")
struct PushTypeTests {
    /// Apple's table of push types and the topic each one needs.
    static let topicSuffixes: [(PushType, String)] = [
        (.alert, ""), (.background, ""), (.complication, ".complication"), (.controls, ".push-type.controls"),
        (.fileprovider, ".pushkit.fileprovider"), (.liveactivity, ".push-type.liveactivity"),
        (.location, ".location-query"), (.mdm, ""), (.pushtotalk, ".voip-ptt"), (.voip, ".voip"),
        (.widgets, ".push-type.widgets"),
    ]

    @Test("there are the 11 push types Apple documents")
    func allElevenPushTypes() {
        #expect(PushType.allCases.count == 11)
        #expect(Set(Self.topicSuffixes.map(\.0)) == Set(PushType.allCases))
    }

    @Test("each push type has Apple's topic suffix and appends it to the bundle id", arguments: topicSuffixes)
    func topicSuffix(pushType: PushType, suffix: String) throws {
        #expect(pushType.topicSuffix == suffix)
        let topic = try Topic("com.example.app")
        #expect(topic.headerValue(for: pushType) == "com.example.app" + suffix)
        // A topic that already carries the suffix is not suffixed twice.
        let suffixed = try Topic("com.example.app" + suffix)
        #expect(suffixed.headerValue(for: pushType) == "com.example.app" + suffix)
    }

    @Test("push types parse from their header value; unknown ones are refused")
    func parsing() throws {
        for pushType in PushType.allCases {
            #expect(try PushType(validating: pushType.rawValue) == pushType)
        }
        #expect(throws: ValidationError(code: .invalidPushType, field: "push_type", message: "")) {
            try PushType(validating: "Alert")
        }
        #expect(throws: ValidationError.self) { try PushType(validating: "") }
    }

    @Test("payloads may be 4096 bytes, and 5120 for VoIP")
    func payloadLimits() {
        for pushType in PushType.allCases {
            #expect(pushType.maximumPayloadBytes == (pushType == .voip ? 5120 : 4096))
        }
    }

    @Test("background pushes must use priority 5; other types allow 1, 5 and 10")
    func backgroundPriority() {
        #expect(PushType.background.allows(.conservePower))
        #expect(!PushType.background.allows(.immediate))
        #expect(!PushType.background.allows(.powerSaving))
        for pushType in PushType.allCases where pushType != .background {
            for priority in Priority.allCases { #expect(pushType.allows(priority)) }
        }
    }

    @Test("priorities are 1, 5 and 10 only")
    func priorities() throws {
        #expect(try Priority(validating: 10) == .immediate)
        #expect(try Priority(validating: 5) == .conservePower)
        #expect(try Priority(validating: 1) == .powerSaving)
        for bad in [0, 2, 4, 6, 9, 11, -1] {
            #expect(throws: ValidationError(code: .invalidPriority, field: "priority", message: "")) {
                try Priority(validating: bad)
            }
        }
    }

    @Test("topics are bundle ids: letters, digits, dash, dot, underscore, 1 to 255 bytes")
    func topics() throws {
        _ = try Topic("com.example.App_1-beta")
        _ = try Topic(String(repeating: "a", count: 255))
        for bad in ["", "com.example app", "com/example", "com.exämple", String(repeating: "a", count: 256)] {
            #expect(throws: ValidationError(code: .invalidTopic, field: "topic", message: "")) { try Topic(bad) }
        }
    }

    @Test("environments have Apple's hosts")
    func environments() {
        #expect(APNsEnvironment.production.host == "api.push.apple.com")
        #expect(APNsEnvironment.sandbox.host == "api.sandbox.push.apple.com")
    }
}

@Suite("Expiration")
struct ExpirationTests {
    @Test("0 means attempt once, without storing")
    func zero() throws {
        #expect(try Expiration(validating: 0) == .immediately)
        #expect(Expiration.immediately.headerValue == "0")
    }

    @Test("a UNIX time in seconds is kept as is")
    func unixTime() throws {
        #expect(try Expiration(validating: 1_800_000_000) == .at(epochSeconds: 1_800_000_000))
        #expect(Expiration.at(epochSeconds: 1_800_000_000).headerValue == "1800000000")
        #expect(try Expiration(validating: 253_402_300_799) == .at(epochSeconds: 253_402_300_799))
    }

    @Test("negative times are refused")
    func negative() {
        #expect(throws: ValidationError(code: .invalidExpiration, field: "expiration", message: "")) {
            try Expiration(validating: -1)
        }
    }

    @Test(
        "a time in milliseconds (a unit mistake) is refused",
        arguments: [1_800_000_000_000, 1_800_000_000_000_000, 253_402_300_800]
    )
    func milliseconds(value: Int64) {
        #expect(throws: ValidationError(code: .invalidExpiration, field: "expiration", message: "")) {
            try Expiration(validating: value)
        }
    }

    @Test("the storage policy omits the header")
    func storagePolicy() {
        #expect(Expiration.storagePolicy.headerValue == nil)
    }
}

@Suite("Collapse ids")
struct CollapseIDTests {
    @Test("64 bytes are accepted, 65 refused")
    func byteLimit() throws {
        #expect(try CollapseID(String(repeating: "k", count: 64)).value.utf8.count == 64)
        #expect(throws: ValidationError(code: .invalidCollapseID, field: "key", message: "")) {
            try CollapseID(String(repeating: "k", count: 65))
        }
    }

    @Test("the limit counts UTF-8 bytes, not characters")
    func utf8Bytes() throws {
        _ = try CollapseID(String(repeating: "é", count: 32))
        #expect(throws: ValidationError.self) { try CollapseID(String(repeating: "é", count: 33)) }
    }

    @Test("empty ids and control characters are refused")
    func emptyAndControl() {
        #expect(throws: ValidationError.self) { try CollapseID("") }
        #expect(throws: ValidationError.self) { try CollapseID("a\nb") }
        #expect(throws: ValidationError.self) { try CollapseID("a\u{7f}") }
    }
}

@Suite("apns-id")
struct APNsIDTests {
    @Test("canonical UUIDs are accepted and kept lower-case")
    func canonical() throws {
        #expect(try APNsID("123e4567-e89b-12d3-a456-4266554400a0").value == "123e4567-e89b-12d3-a456-4266554400a0")
        #expect(try APNsID("123E4567-E89B-12D3-A456-4266554400A0").value == "123e4567-e89b-12d3-a456-4266554400a0")
    }

    @Test(
        "anything but 8-4-4-4-12 hex digits is refused",
        arguments: [
            "", "123e4567e89b12d3a4564266554400a0", "{123e4567-e89b-12d3-a456-4266554400a0}",
            "123e4567-e89b-12d3-a456-4266554400a", "123e4567-e89b-12d3-a456-4266554400a00",
            "123e4567-e89b-12d3-a456_4266554400a0", "123e4567-e89b-12d3-a456-4266554400g0",
            "123e4567-e89b12d3--a456-4266554400a0",
        ]
    )
    func nonCanonical(value: String) {
        #expect(throws: ValidationError(code: .invalidAPNsID, field: "apns_id", message: "")) { try APNsID(value) }
    }

    @Test("generated ids are lower-case version 4 UUIDs with the RFC 4122 variant")
    func generated() throws {
        var generators: [any RandomNumberGenerator] = [
            ConstantGenerator(value: 0), ConstantGenerator(value: .max), SplitMix64(seed: 5), SplitMix64(seed: 6),
        ]
        for index in generators.indices {
            for _ in 0..<50 {
                let id = APNsID(using: &generators[index])
                let characters = Array(id.value)
                #expect(characters.count == 36)
                for (position, character) in characters.enumerated() {
                    if [8, 13, 18, 23].contains(position) {
                        #expect(character == "-")
                    } else {
                        #expect("0123456789abcdef".contains(character))
                    }
                }
                #expect(characters[14] == "4")
                #expect("89ab".contains(characters[19]))
                #expect(try APNsID(id.value) == id)
            }
        }
    }

    @Test("generated ids differ")
    func unique() {
        var generator = SplitMix64(seed: 11)
        let ids = (0..<1000).map { _ in APNsID(using: &generator) }
        #expect(Set(ids).count == 1000)
    }
}
