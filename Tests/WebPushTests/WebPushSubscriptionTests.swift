import Crypto
import Foundation
import PushgateCore
import Testing
import WebPush

/// RFC 8291 §5's user agent: its public key and auth secret make a valid subscription.
enum RFC8291Example {
    static let plaintext = "When I grow up, I want to be a watermelon"
    static let serverPrivateKey = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
    static let serverPublicKey =
        "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let userAgentPrivateKey = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
    static let userAgentPublicKey =
        "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
    static let authSecret = "BTBZMqHH6r4Tts7J_aSIgg"
    static let body =
        "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
}

func base64URLDecoded(_ text: String) -> [UInt8] {
    var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
    return Array(Data(base64Encoded: standard)!)
}

func base64URLEncoded(_ bytes: some Sequence<UInt8>) -> String {
    Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

func subscriptionJSON(
    endpoint: String = "https://push.example.net/wpush/v2/abc?x=1",
    p256dh: String = RFC8291Example.userAgentPublicKey,
    auth: String = RFC8291Example.authSecret,
    extra: String = ""
) -> [UInt8] {
    Array(
        #"{"endpoint":"\#(endpoint)","expirationTime":null,"keys":{"p256dh":"\#(p256dh)","auth":"\#(auth)"}\#(extra)}"#
            .utf8
    )
}

@Suite("Web Push: subscriptions")
struct WebPushSubscriptionTests {
    @Test("a browser's PushSubscription JSON parses: endpoint, origin, path, keys")
    func parses() throws {
        let subscription = try WebPushSubscription(jsonBytes: subscriptionJSON())
        #expect(subscription.endpoint == "https://push.example.net/wpush/v2/abc?x=1")
        #expect(subscription.origin.serialized == "https://push.example.net")
        #expect(subscription.origin.port == 443)
        #expect(subscription.path == "/wpush/v2/abc?x=1")
        #expect(subscription.userAgentPublicKeyBytes == base64URLDecoded(RFC8291Example.userAgentPublicKey))
        #expect(subscription.authSecret == base64URLDecoded(RFC8291Example.authSecret))
        #expect(subscription.p256dh == RFC8291Example.userAgentPublicKey)
        // Round trip through its own JSON.
        #expect(try WebPushSubscription(jsonBytes: Array(subscription.jsonString.utf8)) == subscription)
    }

    @Test("the origin is lower-case, keeps a non-default port and drops 443; IPv6 hosts keep brackets")
    func origins() throws {
        let upper = try WebPushSubscription(jsonBytes: subscriptionJSON(endpoint: "HTTPS://Push.Example.NET:443/a"))
        #expect(upper.origin.serialized == "https://push.example.net")
        let port = try WebPushSubscription(jsonBytes: subscriptionJSON(endpoint: "https://127.0.0.1:8443/push/1"))
        #expect(port.origin.serialized == "https://127.0.0.1:8443")
        #expect(port.origin.connectHost == "127.0.0.1")
        let v6 = try WebPushSubscription(jsonBytes: subscriptionJSON(endpoint: "https://[::1]:9000/p"))
        #expect(v6.origin.serialized == "https://[::1]:9000")
        #expect(v6.origin.connectHost == "::1")
    }

    @Test(
        "each bad field is refused, naming it",
        arguments: [
            (subscriptionJSON(endpoint: "http://push.example.net/a"), "subscription.endpoint"),
            (subscriptionJSON(endpoint: "not a url"), "subscription.endpoint"),
            (subscriptionJSON(endpoint: "https:///nohost"), "subscription.endpoint"),
            (subscriptionJSON(endpoint: "https://user:pw@push.example.net/a"), "subscription.endpoint"),
            (subscriptionJSON(endpoint: "https://push.example.net/a#frag"), "subscription.endpoint"),
            (
                subscriptionJSON(endpoint: "https://push.example.net/" + String(repeating: "a", count: 2100)),
                "subscription.endpoint"
            ),
            (subscriptionJSON(p256dh: "BCVx+r7N"), "subscription.keys.p256dh"),
            (subscriptionJSON(p256dh: base64URLEncoded([UInt8](repeating: 4, count: 64))), "subscription.keys.p256dh"),
            // 65 bytes, 0x04 first, but (1, 1) is not on P-256.
            (
                subscriptionJSON(
                    p256dh: base64URLEncoded(
                        [4] + [UInt8](repeating: 0, count: 31) + [1]
                            + [UInt8](repeating: 0, count: 31) + [1]
                    )
                ), "subscription.keys.p256dh"
            ),
            // Compressed form (33 bytes): browsers send uncompressed points.
            (
                subscriptionJSON(p256dh: base64URLEncoded([3] + [UInt8](repeating: 7, count: 32))),
                "subscription.keys.p256dh"
            ),
            (subscriptionJSON(auth: base64URLEncoded([UInt8](repeating: 1, count: 15))), "subscription.keys.auth"),
            (subscriptionJSON(auth: "!!"), "subscription.keys.auth"),
            (subscriptionJSON(extra: #","channel":"x""#), "subscription.channel"),
            (Array(#"{"endpoint":"https://a.example/p"}"#.utf8), "subscription.keys"),
            (Array(#"{"keys":{"p256dh":"x","auth":"y"}}"#.utf8), "subscription.endpoint"),
            (
                Array(#"{"endpoint":"https://a.example/p","keys":{"auth":"BTBZMqHH6r4Tts7J_aSIgg"}}"#.utf8),
                "subscription.keys.p256dh"
            ),
            (
                Array(#"{"endpoint":"https://a.example/p","expirationTime":"soon","keys":{}}"#.utf8),
                "subscription.expirationTime"
            ),
            (Array("[]".utf8), "subscription"),
        ]
    )
    func refusals(json: [UInt8], field: String) {
        #expect(throws: ValidationError(code: .invalidSubscription, field: field, message: "")) {
            try WebPushSubscription(jsonBytes: json)
        }
    }

    @Test("padded base64url keys are accepted; a full endpoint never appears in the description")
    func lenientAndQuiet() throws {
        let padded = try WebPushSubscription(jsonBytes: subscriptionJSON(auth: RFC8291Example.authSecret + "=="))
        #expect(padded.authSecret.count == 16)
        #expect(!"\(padded)".contains("wpush/v2/abc"))
    }
}
