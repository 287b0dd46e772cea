import Foundation
import Hummingbird
import HummingbirdTesting
import PushgateCore
import PushgateHTTP
import Testing

/// One walk through every route and every error code, run twice: in-process (router test framework)
/// and over a live socket on port 0.
@Suite("HTTP API: every route and error code, in-process and live")
struct EveryRouteTests {
    static let monitoring = HTTPAPI.Monitoring(metricsExposition: { Array("pushgate_test_metric 1\n".utf8) })

    @Test("registry routes, with and without /apps/{app}")
    func registry() async throws {
        try await withBothTransports(monitoring: Self.monitoring) { client, _, transport in
            let check = Checker(client: client, transport: transport)
            try await check(.put, "/v1/apps/default/groups/news/devices/\(tokenA)", .noContent)
            try await check(.put, "/v1/groups/news/devices/\(tokenB.uppercased())", .noContent)
            try await check(.put, "/v1/groups/news/devices/\(tokenB)", .noContent)  // idempotent
            try await check(.put, "/v1/apps/nope/groups/news/devices/\(tokenA)", .notFound, "unknown_app", "app")
            try await check(.put, "/v1/apps/default/groups/news/devices/xyz", .badRequest, "invalid_token", "token")
            try await check(
                .put,
                "/v1/apps/default/groups/%01/devices/\(tokenA)",
                .badRequest,
                "invalid_group",
                "group"
            )

            let all = try await check(.get, "/v1/apps/default/groups/news/devices", .ok)
            #expect(
                (all.json["devices"] as? [[String: Any]])?.compactMap { $0["token"] as? String } == [tokenA, tokenB],
                "\(transport)"
            )
            let first = try await check(.get, "/v1/groups/news/devices?limit=1", .ok)
            #expect((first.json["devices"] as? [Any])?.count == 1, "\(transport)")
            let next = try #require(first.json["next"] as? String)
            let second = try await check(.get, "/v1/groups/news/devices?limit=1&after=\(next)", .ok)
            #expect((second.json["devices"] as? [[String: Any]])?.first?["token"] as? String == tokenB, "\(transport)")
            try await check(.get, "/v1/groups/news/devices?limit=0", .badRequest, "invalid_limit", "limit")
            try await check(.get, "/v1/groups/news/devices?limit=x", .badRequest, "invalid_limit", "limit")
            try await check(.get, "/v1/groups/news/devices?after=", .badRequest, "invalid_cursor", "after")
            try await check(.get, "/v1/groups/none/devices", .notFound, "unknown_group", "group")
            try await check(.get, "/v1/apps/nope/groups/news/devices", .notFound, "unknown_app", "app")

            let device = try await check(.get, "/v1/apps/default/devices/\(tokenA)", .ok)
            #expect(device.json["groups"] as? [String] == ["news"], "\(transport)")
            #expect(device.json["state"] as? String == "valid", "\(transport)")
            try await check(.get, "/v1/devices/\(tokenC)", .notFound, "unknown_device", "token")
            try await check(.get, "/v1/devices/nothex", .badRequest, "invalid_token", "token")

            try await check(
                .delete,
                "/v1/apps/default/groups/news/devices/\(tokenC)",
                .notFound,
                "not_a_member",
                "token"
            )
            try await check(.delete, "/v1/groups/news/devices/\(tokenB)", .noContent)
            try await check(.delete, "/v1/devices/\(tokenB)", .noContent)
            try await check(.delete, "/v1/apps/default/devices/\(tokenB)", .notFound, "unknown_device", "token")
            try await check(.delete, "/v1/apps/nope/devices/\(tokenB)", .notFound, "unknown_app", "app")
        }
    }

    @Test("notifications: submit, report, and every body error")
    func notifications() async throws {
        try await withBothTransports(monitoring: Self.monitoring) { client, fixture, transport in
            let check = Checker(client: client, transport: transport)
            try await check(.put, "/v1/groups/news/devices/\(tokenA)", .noContent)
            let accepted = try await check(
                .post,
                "/v1/notifications",
                .accepted,
                body:
                    #"{"groups": ["news"], "devices": ["\#(tokenB)"], "type": "urgent", "payload": {"aps": {"alert": "hi"}}}"#
            )
            #expect(accepted.json["targets"] as? Int == 2, "\(transport)")
            let id = try #require(accepted.json["id"] as? String)
            // Durable before the answer: the store has it.
            #expect(try await fixture.store.request(PushgateCore.RequestID(id)) != nil, "\(transport)")
            let report = try await check(.get, "/v1/notifications/\(id)", .ok)
            #expect(report.json["state"] as? String == "queued", "\(transport)")
            #expect(report.json["targets"] as? Int == 2, "\(transport)")
            try await check(.get, "/v1/notifications/unknown-id", .notFound, "unknown_notification", "id")
            try await check(.get, "/v1/notifications/no%20way", .badRequest, "invalid_request_id", "id")

            let d = #""devices": ["\#(tokenA)"]"#
            let errors: [(String, HTTPResponse.Status, String, String)] = [
                (#"{"payload": {"#, .badRequest, "malformed_json", "body"),
                (#"{\#(d), "payload": {}, "payload": {}}"#, .badRequest, "duplicate_key", "payload"),
                (#"{\#(d), "payload": {"aps": {}, "aps": {}}}"#, .badRequest, "duplicate_key", "payload.aps"),
                ("7", .badRequest, "not_an_object", "body"),
                (#"{\#(d), "payload": {}, "extra": 1}"#, .badRequest, "unknown_field", "extra"),
                (#"{"devices": "\#(tokenA)", "payload": {}}"#, .badRequest, "wrong_type", "devices"),
                (#"{\#(d)}"#, .badRequest, "missing_field", "payload"),
                (#"{"payload": {}}"#, .badRequest, "no_targets", "groups"),
                (#"{"groups": ["sports"], "payload": {}}"#, .badRequest, "unknown_group", "groups"),
                (#"{"devices": ["12"], "payload": {}}"#, .badRequest, "invalid_token", "devices"),
                (#"{"app": "nope", \#(d), "payload": {}}"#, .notFound, "unknown_app", "app"),
                (#"{"groups": ["a\u0001"], "payload": {}}"#, .badRequest, "invalid_group", "groups"),
                (#"{\#(d), "type": "loud", "payload": {}}"#, .badRequest, "unknown_type", "type"),
                (#"{\#(d), "push_type": "fax", "payload": {}}"#, .badRequest, "invalid_push_type", "push_type"),
                (#"{\#(d), "priority": 3, "payload": {}}"#, .badRequest, "invalid_priority", "priority"),
                (#"{\#(d), "expiration": -5, "payload": {}}"#, .badRequest, "invalid_expiration", "expiration"),
                (#"{\#(d), "key": "", "payload": {}}"#, .badRequest, "invalid_collapse_id", "key"),
                (
                    #"{\#(d), "payload": {"a": "\#(String(repeating: "x", count: 4100))"}}"#, .badRequest,
                    "payload_too_large", "payload"
                ),
            ]
            for (body, status, code, field) in errors {
                try await check(.post, "/v1/notifications", status, code, field, body: body)
            }
            try await check(
                .post,
                "/v1/notifications",
                .badRequest,
                "malformed_json",
                "body",
                bytes: [0x7b, 0x22, 0xff, 0x22, 0x7d]
            )
            // Last: the server may close the connection rather than read the rest of a refused body.
            let huge = #"{\#(d), "payload": {"a": "\#(String(repeating: "x", count: 70_000))"}}"#
            try await check(.post, "/v1/notifications", .contentTooLarge, "body_too_large", "body", body: huge)
            // Only the first request was stored.
            #expect(try await fixture.store.request(PushgateCore.RequestID("req-2")) == nil, "\(transport)")
        }
    }

    @Test("health, readiness, metrics, the OpenAPI document, unknown routes and wrong methods")
    func operations() async throws {
        try await withBothTransports(monitoring: Self.monitoring) { client, _, transport in
            let check = Checker(client: client, transport: transport)
            #expect(try await check(.get, "/healthz", .ok).json["status"] as? String == "ok")
            #expect(try await check(.get, "/readyz", .ok).json["status"] as? String == "ready")
            let metrics = try await check(.get, "/metrics", .ok)
            #expect(String(buffer: metrics.body) == "pushgate_test_metric 1\n", "\(transport)")
            #expect(metrics.headers[.contentType]?.hasPrefix("text/plain") == true, "\(transport)")
            let document = try await check(.get, "/openapi.yaml", .ok)
            #expect(String(buffer: document.body).hasPrefix("openapi: 3.1.0"), "\(transport)")
            #expect(document.headers[.contentType]?.hasPrefix("application/yaml") == true, "\(transport)")
            try await check(.get, "/v2/nothing", .notFound, "not_found", nil)
            let wrongMethod = try await check(.patch, "/v1/notifications", .methodNotAllowed, "method_not_allowed", nil)
            #expect(wrongMethod.headers[.allow] == "POST", "\(transport)")
            let wrongOnDevice = try await check(
                .post,
                "/v1/apps/default/devices/\(tokenA)",
                .methodNotAllowed,
                "method_not_allowed",
                nil
            )
            #expect(wrongOnDevice.headers[.allow] == "GET, DELETE, HEAD", "\(transport)")
            let query = try #require(HTTPRequest.Method("QUERY"))
            let unusual = try await check(query, "/healthz", .methodNotAllowed, "method_not_allowed", nil)
            #expect(unusual.headers[.allow] == "GET, HEAD", "\(transport)")
            try await check(query, "/healthz/more", .notFound, "not_found", nil)
        }
    }
}

@Suite("HTTP API: failures of the gateway around it, in-process and live")
struct DependencyFailureTests {
    @Test("a closed store is 503 store_unavailable on every route that needs it, and for /readyz")
    func storeUnavailable() async throws {
        try await withBothTransports { client, fixture, transport in
            let check = Checker(client: client, transport: transport)
            try fixture.store.close()
            try await check(.put, "/v1/groups/news/devices/\(tokenA)", .serviceUnavailable, "store_unavailable", nil)
            try await check(.get, "/v1/devices/\(tokenA)", .serviceUnavailable, "store_unavailable", nil)
            try await check(.get, "/v1/notifications/some-id", .serviceUnavailable, "store_unavailable", nil)
            try await check(
                .post,
                "/v1/notifications",
                .serviceUnavailable,
                "store_unavailable",
                nil,
                body: #"{"devices": ["\#(tokenA)"], "payload": {}}"#
            )
            try await check(.get, "/readyz", .serviceUnavailable, "store_unavailable", nil)
            #expect(try await check(.get, "/healthz", .ok).json["status"] as? String == "ok", "the process is up")
        }
    }

    @Test("no possible APNs connection is 503 apns_unavailable on /readyz only")
    func apnsUnavailable() async throws {
        try await withBothTransports(monitoring: .init(apnsReachable: { false })) { client, _, transport in
            let check = Checker(client: client, transport: transport)
            try await check(.get, "/readyz", .serviceUnavailable, "apns_unavailable", nil)
            try await check(.put, "/v1/groups/news/devices/\(tokenA)", .noContent)
            try await check(.post, "/v1/notifications", .accepted, body: #"{"groups": ["news"], "payload": {}}"#)
        }
    }
}

/// Sends a request and checks its status and, for errors, the JSON error's code and field.
struct Checker {
    let client: any TestClientProtocol
    let transport: String

    @discardableResult
    func callAsFunction(
        _ method: HTTPRequest.Method,
        _ uri: String,
        _ status: HTTPResponse.Status,
        _ code: String? = nil,
        _ field: String? = nil,
        body: String? = nil,
        bytes: [UInt8]? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> TestResponse {
        let response = try await client.send(method, uri, bytes: bytes ?? body.map { Array($0.utf8) })
        let label = "\(transport) \(method) \(uri.prefix(80))"
        #expect(response.status == status, "\(label)", sourceLocation: sourceLocation)
        if status.code >= 400 {
            #expect(response.error.code == code, "\(label)", sourceLocation: sourceLocation)
            #expect(response.error.field == field, "\(label)", sourceLocation: sourceLocation)
            let error = response.json["error"] as? [String: Any]
            #expect(error?["message"] is String, "\(label)", sourceLocation: sourceLocation)
            #expect(
                Set(error?.keys.map { $0 } ?? []) == ["code", "message", "field"],
                "\(label)",
                sourceLocation: sourceLocation
            )
            #expect(
                response.headers[.contentType]?.hasPrefix("application/json") == true,
                "\(label)",
                sourceLocation: sourceLocation
            )
        }
        return response
    }
}
