import Foundation
import Hummingbird
import HummingbirdTesting
import PushgateCore
import PushgateHTTP
import Testing

/// A browser's `PushSubscription.toJSON()` (RFC 8291 section 5's user agent key and secret).
private let endpoint = "https://push.example.net/wpush/v2/gAAAAABm-browser"
private let p256dh = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
private func subscriptionBody(endpoint: String = endpoint, auth: String = "BTBZMqHH6r4Tts7J_aSIgg") -> String {
    #"{"subscription": {"endpoint": "\#(endpoint)", "expirationTime": null, "keys": {"p256dh": "\#(p256dh)", "auth": "\#(auth)"}}}"#
}
/// The endpoint as a path segment: its `/` percent-encoded (`:` is a path character as it is).
private let segment = endpoint.replacingOccurrences(of: "/", with: "%2F")

@Suite("HTTP API: browsers (?platform=webpush), named by their endpoint, registered with their subscription")
struct WebPushRouteTests {
    @Test(
        "PUT with the subscription registers the browser; GET, DELETE of the membership and of the device reach it by endpoint"
    )
    func webPushDeviceRoutes() async throws {
        try await withRouterClient { client, fixture in
            let put = try await client.send(
                .put,
                "/v1/apps/default/groups/news/devices/\(segment)?platform=webpush",
                json: subscriptionBody()
            )
            #expect(put.status == .noContent)
            let byEndpoint = try DeviceToken(webPushEndpoint: endpoint)
            let record = try #require(try await fixture.store.device(app: "default", token: byEndpoint))
            #expect(record.token.platform == .webpush)
            #expect(record.token.value == "\(endpoint) \(p256dh) BTBZMqHH6r4Tts7J_aSIgg")
            #expect(record.groups == ["news"])

            let get = try await client.send(.get, "/v1/apps/default/devices/\(segment)?platform=webpush")
            #expect(get.status == .ok)
            #expect(get.json["token"] as? String == endpoint)
            #expect(get.json["platform"] as? String == "webpush")
            let keys = (get.json["subscription"] as? [String: Any])?["keys"] as? [String: String]
            #expect(keys == ["p256dh": p256dh, "auth": "BTBZMqHH6r4Tts7J_aSIgg"])

            let page = try await client.send(.get, "/v1/apps/default/groups/news/devices")
            let listed = try #require(page.json["devices"] as? [[String: Any]])
            #expect(listed.map { $0["token"] as? String } == [endpoint])

            let unassign = try await client.send(
                .delete,
                "/v1/apps/default/groups/news/devices/\(segment)?platform=webpush"
            )
            #expect(unassign.status == .noContent)
            #expect(try await fixture.store.device(app: "default", token: byEndpoint)?.groups == [])
            let remove = try await client.send(.delete, "/v1/apps/default/devices/\(segment)?platform=webpush")
            #expect(remove.status == .noContent)
            #expect(try await fixture.store.device(app: "default", token: byEndpoint) == nil)
        }
    }

    @Test("a new subscription of the same endpoint replaces the browser's keys: one device")
    func reRegistrationReplacesTheKeys() async throws {
        try await withRouterClient { client, fixture in
            let path = "/v1/apps/default/groups/news/devices/\(segment)?platform=webpush"
            #expect(try await client.send(.put, path, json: subscriptionBody()).status == .noContent)
            let renewed = "AAAAAAAAAAAAAAAAAAAAAA"
            #expect(try await client.send(.put, path, json: subscriptionBody(auth: renewed)).status == .noContent)
            let page = try await fixture.store.devices(app: "default", group: "news", after: nil, limit: 10)
            #expect(page.devices.count == 1)
            #expect(page.devices.first?.token.value.hasSuffix(" \(renewed)") == true)
        }
    }

    @Test(
        "a registration without its subscription, or for another endpoint, or a bad endpoint, is 400 naming the field",
        arguments: [
            ("/v1/apps/default/groups/news/devices/\(segment)?platform=webpush", nil, "missing_field", "subscription"),
            (
                "/v1/apps/default/groups/news/devices/\(segment)?platform=webpush",
                subscriptionBody(endpoint: "https://push.example.net/other"), "invalid_subscription",
                "subscription.endpoint"
            ),
            (
                "/v1/apps/default/groups/news/devices/\(segment)?platform=webpush",
                subscriptionBody(auth: "AAAA"), "invalid_subscription", "subscription.keys.auth"
            ),
            (
                "/v1/apps/default/groups/news/devices/http:%2F%2Fpush.example.net%2Fx?platform=webpush",
                subscriptionBody(), "invalid_subscription", "token"
            ),
        ] as [(String, String?, String, String)]
    )
    func refusals(path: String, body: String?, code: String, field: String) async throws {
        try await withRouterClient { client, fixture in
            let response = try await client.send(.put, path, json: body)
            #expect(response.status == .badRequest)
            #expect(response.error.code == code, "\(response.json)")
            #expect(response.error.field == field, "\(response.json)")
            let any = try await fixture.store.device(app: "default", token: DeviceToken(webPushEndpoint: endpoint))
            #expect(any == nil, "nothing registered")
        }
    }

    @Test("POST /v1/notifications keeps a webpush object and refuses a Web Push message over 3,993 bytes")
    func webPushObject() async throws {
        try await withRouterClient { client, fixture in
            _ = try await client.send(
                .put,
                "/v1/apps/default/groups/news/devices/\(segment)?platform=webpush",
                json: subscriptionBody()
            )
            let accepted = try await client.send(
                .post,
                "/v1/notifications",
                json: #"{"groups": ["news"], "payload": {"aps": {"alert": "hi"}}, "webpush": {"aps": null, "t": 1}}"#
            )
            #expect(accepted.status == .accepted)
            let id = try RequestID(try #require(accepted.json["id"] as? String))
            let stored = try #require(try await fixture.store.request(id))
            #expect(stored.webPush?.bytes == Array(#"{"aps": null, "t": 1}"#.utf8))

            let big = String(repeating: "x", count: WebPushMessage.maximumBytes)
            let refused = try await client.send(
                .post,
                "/v1/notifications",
                json: #"{"groups": ["news"], "payload": {}, "webpush": {"body": "\#(big)"}}"#
            )
            #expect(refused.status == .badRequest)
            #expect(refused.error.code == "payload_too_large")
            #expect(refused.error.field == "webpush.body")
        }
    }
}
