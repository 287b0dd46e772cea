import Foundation
import Hummingbird
import HummingbirdTesting
import PushgateCore
import PushgateHTTP
import Testing

@Suite("HTTP API: notifications and delivery reports")
struct NotificationRouteTests {
    @Test("POST stores the request and answers 202 with its id and target count")
    func submitAccepted() async throws {
        try await withRouterClient { client, fixture in
            _ = try await client.send(.put, "/v1/apps/default/groups/news/devices/\(tokenA)")
            _ = try await client.send(.put, "/v1/apps/default/groups/news/devices/\(tokenB)")
            let response = try await client.send(
                .post,
                "/v1/notifications",
                json: #"""
                    {"groups": ["news"], "devices": ["\#(tokenC)"], "type": "urgent", "expiration": 1900000000,
                     "key": "k1", "payload": {"aps": {"alert": "hi"}, "n": 1.5}}
                    """#
            )
            #expect(response.status == .accepted)
            #expect(response.json["id"] as? String == "req-1")
            #expect(response.json["targets"] as? Int == 3)

            let stored = try #require(try await fixture.store.request(PushgateCore.RequestID("req-1")))
            #expect(stored.app == "default")
            #expect(stored.groups == ["news"])
            #expect(stored.devices == [try DeviceToken(hex: tokenC)])
            #expect(stored.pushType == .alert)
            #expect(stored.priority == .immediate)
            #expect(stored.expiration == .at(epochSeconds: 1_900_000_000))
            #expect(stored.collapseID?.value == "k1")
            #expect(stored.createdAt == APIFixture.start)
            let payload = try JSONSerialization.jsonObject(with: Data(stored.payload.bytes)) as? [String: Any]
            #expect((payload?["aps"] as? [String: Any])?["alert"] as? String == "hi")
            #expect(payload?["n"] as? Double == 1.5)
        }
    }

    @Test("type maps as the C pushd's: background → background/5, normal → alert/5, urgent → alert/10")
    func typeMapping() async throws {
        try await withRouterClient { client, fixture in
            let cases: [(String?, PushType, Priority)] = [
                (nil, .background, .conservePower), ("background", .background, .conservePower),
                ("normal", .alert, .conservePower), ("urgent", .alert, .immediate),
            ]
            for (index, (type, pushType, priority)) in cases.enumerated() {
                let typeField = type.map { #""type": "\#($0)", "# } ?? ""
                let response = try await client.send(
                    .post,
                    "/v1/notifications",
                    json: #"{\#(typeField)"devices": ["\#(tokenA)"], "payload": {}}"#
                )
                #expect(response.status == .accepted)
                let stored = try #require(try await fixture.store.request(PushgateCore.RequestID("req-\(index + 1)")))
                #expect(stored.pushType == pushType)
                #expect(stored.priority == priority)
            }
            let overridden = try await client.send(
                .post,
                "/v1/notifications",
                json:
                    #"{"type": "normal", "push_type": "voip", "priority": 10, "devices": ["\#(tokenA)"], "payload": {}}"#
            )
            #expect(overridden.status == .accepted)
            let stored = try #require(try await fixture.store.request(PushgateCore.RequestID("req-5")))
            #expect(stored.pushType == .voip)
            #expect(stored.priority == .immediate)
        }
    }

    @Test(
        "GET a notification answers its delivery report, unknown groups listed, split by service; an unknown id is 404"
    )
    func report() async throws {
        try await withRouterClient { client, _ in
            _ = try await client.send(.put, "/v1/apps/default/groups/news/devices/\(tokenA)")
            let id =
                try await client.send(
                    .post,
                    "/v1/notifications",
                    json: #"{"groups": ["news", "nothing"], "payload": {"aps": {}}}"#
                ).json["id"] as? String
            let response = try await client.send(.get, "/v1/notifications/\(try #require(id))")
            #expect(response.status == .ok)
            let json = response.json
            #expect(json["id"] as? String == id)
            #expect(json["app"] as? String == "default")
            #expect(json["state"] as? String == "queued")
            #expect(json["targets"] as? Int == 1)
            #expect(json["accepted"] as? Int == 0)
            #expect(json["failed"] as? Int == 0)
            #expect((json["failed_by_reason"] as? [String: Any])?.isEmpty == true)
            #expect(json["pending_retries"] as? Int == 0)
            #expect(json["skipped"] as? Int == 0, "targets invalidated or removed since: none")
            #expect(json["created_at"] as? String == "2027-01-15T08:00:00.000Z")
            #expect(json["finished_at"] is NSNull)
            #expect(json["unknown_groups"] as? [String] == ["nothing"])
            let services = try #require(json["services"] as? [String: [String: Int]])
            #expect(services["apns"] == ["targets": 1, "accepted": 0, "failed": 0, "skipped": 0])
            #expect(services["fcm"] == ["targets": 0, "accepted": 0, "failed": 0, "skipped": 0])
            #expect(services["webpush"] == ["targets": 0, "accepted": 0, "failed": 0, "skipped": 0])

            let unknown = try await client.send(.get, "/v1/notifications/nothing-here")
            #expect(unknown.status == .notFound)
            #expect(unknown.error.code == "unknown_notification")
            #expect(unknown.error.field == "id")
            let invalid = try await client.send(.get, "/v1/notifications/bad%20id")
            #expect(invalid.status == .badRequest)
            #expect(invalid.error.code == "invalid_request_id")
        }
    }

    @Test("each problem of a body has its own code and names its field; nothing is stored")
    func bodyErrors() async throws {
        try await withRouterClient { client, fixture in
            _ = try await client.send(.put, "/v1/apps/default/groups/news/devices/\(tokenA)")
            let d = #""devices": ["\#(tokenA)"]"#
            let cases: [(body: String, status: HTTPResponse.Status, code: String, field: String)] = [
                (#"{"groups": ["news"], "payload": "#, .badRequest, "malformed_json", "body"),
                ("[1, 2]", .badRequest, "not_an_object", "body"),
                (#"{\#(d), "payload": {}, "colour": "red"}"#, .badRequest, "unknown_field", "colour"),
                (#"{"groups": "news", "payload": {}}"#, .badRequest, "wrong_type", "groups"),
                (#"{"groups": [1], "payload": {}}"#, .badRequest, "wrong_type", "groups"),
                (#"{\#(d), "expiration": "1", "payload": {}}"#, .badRequest, "wrong_type", "expiration"),
                (#"{\#(d), "expiration": 1.5, "payload": {}}"#, .badRequest, "wrong_type", "expiration"),
                (#"{\#(d), "priority": true, "payload": {}}"#, .badRequest, "wrong_type", "priority"),
                (#"{\#(d), "key": null, "payload": {}}"#, .badRequest, "wrong_type", "key"),
                (#"{\#(d), "payload": [1]}"#, .badRequest, "wrong_type", "payload"),
                (#"{\#(d)}"#, .badRequest, "missing_field", "payload"),
                (#"{"payload": {}}"#, .badRequest, "no_targets", "groups"),
                (#"{"app": "other", \#(d), "payload": {}}"#, .notFound, "unknown_app", "app"),
                (#"{"app": 7, \#(d), "payload": {}}"#, .badRequest, "wrong_type", "app"),
                (#"{"groups": ["nothing", "none"], "payload": {}}"#, .badRequest, "unknown_group", "groups"),
                (#"{"groups": [""], "payload": {}}"#, .badRequest, "invalid_group", "groups"),
                (#"{"devices": ["xyz"], "payload": {}}"#, .badRequest, "invalid_token", "devices"),
                (#"{\#(d), "type": "loud", "payload": {}}"#, .badRequest, "unknown_type", "type"),
                (#"{\#(d), "push_type": "fax", "payload": {}}"#, .badRequest, "invalid_push_type", "push_type"),
                (#"{\#(d), "priority": 7, "payload": {}}"#, .badRequest, "invalid_priority", "priority"),
                (
                    #"{\#(d), "type": "background", "priority": 10, "payload": {}}"#, .badRequest, "invalid_priority",
                    "priority"
                ),
                (#"{\#(d), "expiration": -1, "payload": {}}"#, .badRequest, "invalid_expiration", "expiration"),
                (
                    #"{\#(d), "key": "\#(String(repeating: "k", count: 65))", "payload": {}}"#, .badRequest,
                    "invalid_collapse_id", "key"
                ),
                (
                    #"{\#(d), "payload": {"a": "\#(String(repeating: "x", count: 4100))"}}"#, .badRequest,
                    "payload_too_large", "payload"
                ),
            ]
            for test in cases {
                let response = try await client.send(.post, "/v1/notifications", json: test.body)
                #expect(response.status == test.status, "\(test.code): \(test.body.prefix(80))")
                #expect(response.error.code == test.code, "\(test.body.prefix(80))")
                #expect(response.error.field == test.field, "\(test.body.prefix(80))")
                #expect((response.json["error"] as? [String: Any])?["message"] is String)
            }
            // None of them was stored: the next accepted request takes the next id, and no earlier id exists.
            let accepted = try await client.send(.post, "/v1/notifications", json: #"{\#(d), "payload": {}}"#)
            #expect(accepted.status == .accepted)
            let acceptedID = try #require(accepted.json["id"] as? String)
            for index in 1..<(cases.count + 1) {
                let id = try PushgateCore.RequestID("req-\(index)")
                if id.value != acceptedID { #expect(try await fixture.store.request(id) == nil) }
            }
        }
    }

    @Test("a voip payload may be larger than an alert's")
    func voipPayloadLimit() async throws {
        try await withRouterClient { client, _ in
            let big = String(repeating: "x", count: 4200)
            let body = #"{"devices": ["\#(tokenA)"], "push_type": "voip", "priority": 10, "payload": {"a": "\#(big)"}}"#
            let response = try await client.send(.post, "/v1/notifications", json: body)
            #expect(response.status == .accepted)
        }
    }

    @Test("a body over the limit is 413 body_too_large")
    func bodyTooLarge() async throws {
        try await withRouterClient(maximumBodyBytes: 2048) { client, _ in
            let body = #"{"devices": ["\#(tokenA)"], "payload": {"a": "\#(String(repeating: "x", count: 3000))"}}"#
            let response = try await client.send(.post, "/v1/notifications", json: body)
            #expect(response.status == .contentTooLarge)
            #expect(response.error.code == "body_too_large")
            #expect(response.error.field == "body")
        }
    }

    @Test("with several apps, the body must name one")
    func appRequiredWithSeveralApps() async throws {
        try await withRouterClient(apps: ["one", "two"]) { client, fixture in
            let missing = try await client.send(
                .post,
                "/v1/notifications",
                json: #"{"devices": ["\#(tokenA)"], "payload": {}}"#
            )
            #expect(missing.status == .badRequest)
            #expect(missing.error.code == "missing_field")
            #expect(missing.error.field == "app")
            let named = try await client.send(
                .post,
                "/v1/notifications",
                json: #"{"app": "two", "devices": ["\#(tokenA)"], "payload": {}}"#
            )
            #expect(named.status == .accepted)
            let stored = try await fixture.store.request(
                PushgateCore.RequestID(try #require(named.json["id"] as? String))
            )
            #expect(stored?.app == "two")
        }
    }
}
