import Foundation
import PushgateCore
import PushgateUDP
import Testing

/// An FCM registration token as Google's look: an instance id, a colon, `APA91b` and URL-safe characters.
let fcmToken = "cXJ5dGVzdC1pbnN0YW5jZQ:APA91bH" + String(repeating: "Xy_9-kQ", count: 22)

@Suite("FCM on the UDP datagrams: platform, fcm_devices, the fcm object")
struct FCMDatagramTests {
    static let apnsToken = "be6406fe9e686c11f999c9d47e33b41be56be48f0c77570423bb89f5b51cf127"
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let id = try! RequestID("req-1")

    private func register(_ text: String) throws(ValidationError) -> RegistrationCommand {
        try RegistrationDatagram.parse(Array(text.utf8), receivedAt: Self.now)
    }

    private func notify(_ text: String) throws(ValidationError) -> NotificationRequest {
        try NotificationDatagram.parse(Array(text.utf8), id: Self.id, receivedAt: Self.now)
    }

    // MARK: Registration

    @Test("\"platform\": \"fcm\" registers an FCM device, its token kept exactly as given (case and all)")
    func fcmRegistration() throws {
        let command = try register(#"{"device": "\#(fcmToken)", "group": "Choom", "platform": "fcm"}"#)
        #expect(
            command
                == .register(
                    Registration(app: "default", token: try DeviceToken(fcm: fcmToken), group: "Choom", at: Self.now)
                )
        )
        #expect(command.token.platform == .fcm)
        #expect(command.token.value == fcmToken)
        #expect(command.token != (try DeviceToken(fcm: fcmToken.lowercased())), "FCM tokens are case-sensitive")
    }

    @Test("without platform a device is APNs, as with pushd; \"platform\": \"apns\" says the same")
    func apnsIsTheDefault() throws {
        let pushd = try register(#"{"device": "\#(Self.apnsToken)", "group": "Choom"}"#)
        let explicit = try register(#"{"device": "\#(Self.apnsToken)", "group": "Choom", "platform": "apns"}"#)
        #expect(pushd == explicit)
        #expect(pushd.token.platform == .apns)
        #expect(pushd.token == (try DeviceToken(hex: Self.apnsToken)))
    }

    @Test("\"remove\": true reaches an FCM device")
    func fcmRemoval() throws {
        let command = try register(#"{"platform": "fcm", "device": "\#(fcmToken)", "group": "Choom", "remove": true}"#)
        #expect(command == .unassign(app: "default", token: try DeviceToken(fcm: fcmToken), group: "Choom"))
    }

    @Test(
        "a bad platform or a token that is not one of its platform's rejects the datagram, naming the field",
        arguments: [
            (
                #"{"device": "\#(fcmToken)", "group": "g", "platform": "huawei"}"#,
                ValidationError.Code.invalidPlatform, "platform"
            ),
            (#"{"device": "\#(fcmToken)", "group": "g", "platform": "FCM"}"#, .invalidPlatform, "platform"),
            (#"{"device": "\#(fcmToken)", "group": "g", "platform": ""}"#, .invalidPlatform, "platform"),
            (#"{"device": "\#(fcmToken)", "group": "g", "platform": 1}"#, .wrongType, "platform"),
            (#"{"device": "\#(fcmToken)", "group": "g", "platform": null}"#, .wrongType, "platform"),
            // The platform is checked before the token: a bad platform is the reason, not the token.
            (#"{"device": "short", "group": "g", "platform": "hms"}"#, .invalidPlatform, "platform"),
            (#"{"device": "\#(fcmToken)", "group": "g"}"#, .invalidToken, "device"),
            (#"{"device": "\#(fcmToken)", "group": "g", "platform": "apns"}"#, .invalidToken, "device"),
            (#"{"device": "tooShortForFCM", "group": "g", "platform": "fcm"}"#, .invalidToken, "device"),
            (#"{"device": "\#(fcmToken)/x", "group": "g", "platform": "fcm"}"#, .invalidToken, "device"),
            (#"{"device": "\#(fcmToken) ", "group": "g", "platform": "fcm"}"#, .invalidToken, "device"),
            (
                #"{"device": "\#(String(repeating: "a", count: 1025))", "group": "g", "platform": "fcm"}"#,
                .invalidToken, "device"
            ),
            (#"{"device": "\#(fcmToken)", "platform": "fcm"}"#, .missingField, "group"),
        ] as [(String, ValidationError.Code, String)]
    )
    func registrationRejections(datagram: String, code: ValidationError.Code, field: String) {
        do {
            let command = try register(datagram)
            Issue.record("accepted \(datagram.debugDescription) as \(command)")
        } catch {
            #expect(error.code == code, "\(datagram.debugDescription): \(error)")
            #expect(error.field == field, "\(datagram.debugDescription): \(error)")
            #expect(!error.description.contains(fcmToken), "a rejection never echoes the token")
        }
    }

    // MARK: Notification

    @Test("fcm_devices target FCM devices directly, beside APNs devices; duplicates dropped per platform")
    func fcmDevices() throws {
        let request = try notify(
            """
            {"devices": ["\(Self.apnsToken)"], "fcm_devices": ["\(fcmToken)", "\(fcmToken)"], "payload": {}}
            """
        )
        #expect(request.devices == [try DeviceToken(hex: Self.apnsToken), try DeviceToken(fcm: fcmToken)])
        #expect(try notify(#"{"fcm_devices": ["\#(fcmToken)"], "payload": {}}"#).devices.map(\.platform) == [.fcm])
        // The same text in both lists is two devices: a platform is part of a device's identity.
        let hexLooking = String(repeating: "ab", count: 16)
        let both = try notify(#"{"devices": ["\#(hexLooking)"], "fcm_devices": ["\#(hexLooking)"], "payload": {}}"#)
        #expect(both.devices.map(\.platform) == [.apns, .fcm])
    }

    @Test("an fcm object is kept in the request, and the FCM message derived from it carries it")
    func fcmOverride() throws {
        let request = try notify(
            """
            {"groups": ["g"], "type": "urgent", "payload": {"aps": {"alert": "hi"}},
             "fcm": {"android": {"priority": "NORMAL", "notification": {"channel_id": "news"}}, "data": {"k": "v"}}}
            """
        )
        let override = try #require(request.fcm)
        #expect(
            override.bytes
                == Array(
                    #"{"android": {"priority": "NORMAL", "notification": {"channel_id": "news"}}, "data": {"k": "v"}}"#
                        .utf8
                )
        )
        let message = try FCMMessage(request: request)
        #expect(message.jsonWithoutTarget.contains(#""channel_id":"news""#))
        #expect(message.jsonWithoutTarget.contains(#""priority":"NORMAL""#), "the override beats urgent's HIGH")
        #expect(message.jsonWithoutTarget.contains(#""data":{"k":"v"}"#))
        #expect(try notify(#"{"groups": ["g"], "payload": {}}"#).fcm == nil)
    }

    @Test("docs/fcm.md's example of the fcm object gives the message it shows")
    func documentedExample() throws {
        let request = try notify(
            """
            {"groups": ["news"], "type": "urgent", "payload": {"aps": {"alert": "Goal!"}, "match": 7},
             "fcm": {"android": {"priority": "NORMAL", "notification": {"channel_id": "scores"}}, "data": null}}
            """
        )
        let json = try FCMMessage(request: request).jsonWithoutTarget
        #expect(
            json
                == #"{"android":{"notification":{"channel_id":"scores"},"priority":"NORMAL","ttl":"0s"},"#
                + #""notification":{"body":"Goal!"}}"#,
            "\(json)"
        )
    }

    static let oversizedFCMData = String(repeating: "x", count: FCMMessage.maximumBytes)

    @Test(
        "an fcm object or fcm_devices FCM cannot take rejects the whole datagram, naming the field",
        arguments: [
            (#"{"groups": ["g"], "payload": {}, "fcm": []}"#, ValidationError.Code.wrongType, "fcm"),
            (#"{"groups": ["g"], "payload": {}, "fcm": "x"}"#, .wrongType, "fcm"),
            (#"{"groups": ["g"], "payload": {}, "fcm": {"token": "t"}}"#, .invalidFCMMessage, "fcm.token"),
            (#"{"groups": ["g"], "payload": {}, "fcm": {"topic": "news"}}"#, .invalidFCMMessage, "fcm.topic"),
            (#"{"groups": ["g"], "payload": {}, "fcm": {"data": {"n": 1}}}"#, .invalidFCMMessage, "fcm.data.n"),
            (
                #"{"groups": ["g"], "payload": {}, "fcm": {"notification": "x"}}"#, .invalidFCMMessage,
                "fcm.notification"
            ),
            (#"{"groups": ["g"], "payload": {}, "fcm": {"a": 1, "a": 2}}"#, .duplicateKey, "fcm"),
            (
                #"{"groups": ["g"], "payload": {}, "fcm": {"data": {"big": "\#(oversizedFCMData)"}}}"#,
                .payloadTooLarge, "fcm.data.big"
            ),
            (
                #"{"fcm_devices": ["\#(fcmToken)"], "payload": {"x": "\#(String(repeating: "y", count: 4080))"}}"#,
                .payloadTooLarge, "payload.x"
            ),
            (#"{"fcm_devices": "\#(fcmToken)", "payload": {}}"#, .wrongType, "fcm_devices"),
            (#"{"fcm_devices": ["short"], "payload": {}}"#, .invalidToken, "fcm_devices"),
            (#"{"devices": ["\#(fcmToken)"], "payload": {}}"#, .invalidToken, "devices"),
            (#"{"fcm_devices": [], "payload": {}}"#, .noTargets, "groups"),
            (#"{"groups": ["g"], "payload": {}, "platform": "fcm"}"#, .unknownKey, "platform"),
        ] as [(String, ValidationError.Code, String)]
    )
    func notificationRejections(datagram: String, code: ValidationError.Code, field: String) {
        do {
            let request = try notify(datagram)
            Issue.record("accepted \(datagram.prefix(200).debugDescription) as \(request)")
        } catch {
            #expect(error.code == code, "\(datagram.prefix(200).debugDescription): \(error)")
            #expect(error.field == field, "\(datagram.prefix(200).debugDescription): \(error)")
        }
    }

    /// A payload at APNs' limit whose FCM message would be larger: pushd accepted it, so we do; the same
    /// request speaking FCM (an `fcm` object, `fcm_devices`) is refused.
    @Test("pushd's datagrams are unchanged: a payload at APNs' limit is accepted; speaking FCM, it is refused")
    func pushdPayloadAtTheLimit() throws {
        let filler = String(repeating: "x", count: 4096 - #"{"p":""}"#.utf8.count)
        let payload = #"{"p":"\#(filler)"}"#
        let pushd = try notify(#"{"groups": ["g"], "type": "urgent", "payload": \#(payload)}"#)
        #expect(pushd.payload.count == 4096)
        #expect(pushd.fcm == nil)
        #expect(throws: ValidationError(code: .payloadTooLarge, field: "payload.p", message: "")) {
            try FCMMessage(request: pushd)
        }
        #expect(throws: ValidationError(code: .payloadTooLarge, field: "payload.p", message: "")) {
            try notify(#"{"groups": ["g"], "type": "urgent", "payload": \#(payload), "fcm": {}}"#)
        }
        #expect(throws: ValidationError(code: .payloadTooLarge, field: "payload.p", message: "")) {
            try notify(#"{"groups": ["g"], "fcm_devices": ["\#(fcmToken)"], "payload": \#(payload)}"#)
        }
    }
}
