import Foundation
import PushgateCore
import PushgateUDP
import Testing

/// A browser's `PushSubscription.toJSON()` (RFC 8291 section 5's user agent key and secret).
let webPushEndpoint = "https://fcm.googleapis.com/fcm/send/cXq9Wbf3:APA91bH_browser-one"
let webPushSubscriptionJSON = """
    {"endpoint": "\(webPushEndpoint)", "expirationTime": null,
     "keys": {"p256dh": "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
              "auth": "BTBZMqHH6r4Tts7J_aSIgg"}}
    """

@Suite("Web Push on the UDP datagrams: platform webpush with a subscription, the webpush object")
struct WebPushDatagramTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let id = try! RequestID("req-1")

    private func register(_ text: String) throws(ValidationError) -> RegistrationCommand {
        try RegistrationDatagram.parse(Array(text.utf8), receivedAt: Self.now)
    }

    private func notify(_ text: String) throws(ValidationError) -> NotificationRequest {
        try NotificationDatagram.parse(Array(text.utf8), id: Self.id, receivedAt: Self.now)
    }

    static var subscription: DeviceToken {
        DeviceToken(webPush: try! WebPushSubscription(jsonBytes: Array(webPushSubscriptionJSON.utf8)))
    }

    @Test("\"platform\": \"webpush\" registers the browser's subscription, endpoint and keys, in the group")
    func webPushRegistration() throws {
        let command = try register(
            #"{"platform": "webpush", "subscription": \#(webPushSubscriptionJSON), "group": "news"}"#
        )
        #expect(
            command == .register(Registration(app: "default", token: Self.subscription, group: "news", at: Self.now))
        )
        #expect(command.token.platform == .webpush)
        #expect(command.token.webPushEndpoint == webPushEndpoint[...])
        #expect(!command.token.shortened.contains("cXq9Wbf3"), "logs show the endpoint's end only")
    }

    @Test("\"remove\": true takes the browser out of the group")
    func webPushRemoval() throws {
        let command = try register(
            #"{"platform": "webpush", "subscription": \#(webPushSubscriptionJSON), "group": "news", "remove": true}"#
        )
        #expect(command == .unassign(app: "default", token: Self.subscription, group: "news"))
    }

    @Test(
        "a subscription that is not a browser's rejects the datagram, naming the field",
        arguments: [
            (#"{"platform": "webpush", "group": "g"}"#, ValidationError.Code.missingField, "subscription"),
            (#"{"platform": "webpush", "subscription": "x", "group": "g"}"#, .wrongType, "subscription"),
            (
                #"{"platform": "webpush", "device": "\#(webPushEndpoint)", "subscription": \#(webPushSubscriptionJSON), "group": "g"}"#,
                .invalidToken, "device"
            ),
            (
                #"{"device": "\#(String(repeating: "ab", count: 32))", "subscription": \#(webPushSubscriptionJSON), "group": "g"}"#,
                .invalidSubscription, "subscription"
            ),
            (
                #"{"platform": "webpush", "subscription": {"endpoint": "http://push.example/x", "keys": {"p256dh": "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", "auth": "BTBZMqHH6r4Tts7J_aSIgg"}}, "group": "g"}"#,
                .invalidSubscription, "subscription.endpoint"
            ),
            (
                #"{"platform": "webpush", "subscription": {"endpoint": "https://push.example/x", "keys": {"p256dh": "BAAA", "auth": "BTBZMqHH6r4Tts7J_aSIgg"}}, "group": "g"}"#,
                .invalidSubscription, "subscription.keys.p256dh"
            ),
            (
                #"{"platform": "webpush", "subscription": {"endpoint": "https://push.example/x", "keys": {"p256dh": "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", "auth": "AAAA"}}, "group": "g"}"#,
                .invalidSubscription, "subscription.keys.auth"
            ),
            (#"{"platform": "webpush", "subscription": \#(webPushSubscriptionJSON)}"#, .missingField, "group"),
        ] as [(String, ValidationError.Code, String)]
    )
    func registrationRejections(datagram: String, code: ValidationError.Code, field: String) {
        do {
            let command = try register(datagram)
            Issue.record("accepted \(datagram.debugDescription) as \(command)")
        } catch {
            #expect(error.code == code, "\(datagram.debugDescription): \(error)")
            #expect(error.field == field, "\(datagram.debugDescription): \(error)")
        }
    }

    @Test("a webpush object is kept in the request; the browsers' message is the payload patched by it")
    func webPushOverride() throws {
        let request = try notify(
            #"{"groups": ["g"], "payload": {"aps": {"alert": "hi"}, "match": 7}, "webpush": {"aps": null, "title": "Goal!"}}"#
        )
        let override = try #require(request.webPush)
        #expect(override.bytes == Array(#"{"aps": null, "title": "Goal!"}"#.utf8))
        #expect(
            try WebPushMessage(request: request, override: request.webPush).plaintext
                == Array(#"{"match":7,"title":"Goal!"}"#.utf8)
        )
        #expect(try notify(#"{"groups": ["g"], "payload": {}}"#).webPush == nil)
    }

    @Test("a Web Push message over 3,993 bytes is refused before storing, naming the field; webpush must be an object")
    func webPushRefusals() {
        let big = String(repeating: "x", count: WebPushMessage.maximumBytes)
        let cases: [(String, ValidationError.Code, String)] = [
            (#"{"groups": ["g"], "payload": {}, "webpush": {"body": "\#(big)"}}"#, .payloadTooLarge, "webpush.body"),
            (#"{"groups": ["g"], "payload": {}, "webpush": []}"#, .wrongType, "webpush"),
        ]
        for (datagram, code, field) in cases {
            do {
                _ = try notify(datagram)
                Issue.record("accepted \(datagram.prefix(80))")
            } catch {
                #expect(error.code == code, "\(error)")
                #expect(error.field == field, "\(error)")
            }
        }
    }
}
