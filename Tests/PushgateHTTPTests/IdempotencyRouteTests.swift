import Foundation
import Hummingbird
import HummingbirdTesting
import PushgateCore
import PushgateHTTP
import Testing

extension TestClientProtocol {
    /// `POST /v1/notifications` with `body`, and `Idempotency-Key: key` for each key given.
    func submit(_ body: String, keys: [String]) async throws -> TestResponse {
        var headers: HTTPFields = [.contentType: "application/json"]
        for key in keys {
            headers.append(HTTPFields.Element(name: HTTPFields.Element.Name("Idempotency-Key")!, value: key))
        }
        return try await execute(
            uri: "/v1/notifications",
            method: .post,
            headers: headers,
            body: ByteBuffer(string: body)
        )
    }
}

@Suite("HTTP API: Idempotency-Key on POST /v1/notifications")
struct IdempotencyRouteTests {
    static let body = #"{"groups": ["news", "nothing"], "payload": {"aps": {"alert": "hi"}}}"#

    static func registerTwo(_ client: some TestClientProtocol, app: String = "default") async throws {
        for token in [tokenA, tokenB] {
            #expect(try await client.send(.put, "/v1/apps/\(app)/groups/news/devices/\(token)").status == .noContent)
        }
    }

    @Test("the same key and body again answers the first request's 202 body and stores nothing")
    func retryAnswersTheFirstRequest() async throws {
        try await withBothTransports { client, fixture, transport in
            try await Self.registerTwo(client)
            let first = try await client.submit(Self.body, keys: ["order 4711/A"])
            #expect(first.status == .accepted, "\(transport)")
            #expect(first.json["id"] as? String == "req-1", "\(transport)")
            #expect(first.json["targets"] as? Int == 2, "\(transport)")
            fixture.clock.advance(by: 24 * 3600 - 1)
            let retry = try await client.submit(Self.body, keys: ["order 4711/A"])
            #expect(retry.status == .accepted, "\(transport)")
            #expect(String(buffer: retry.body) == String(buffer: first.body), "\(transport): the same body")
            #expect(try await fixture.store.request(PushgateCore.RequestID("req-2")) == nil, "\(transport)")
            let stored = try #require(try await fixture.store.request(PushgateCore.RequestID("req-1")))
            #expect(stored.idempotency?.key.value == "order 4711/A", "\(transport): kept with the request")
            // Without a key, the same body is a new request.
            let unkeyed = try await client.send(.post, "/v1/notifications", json: Self.body)
            #expect(unkeyed.json["id"] as? String == "req-3", "\(transport)")
        }
    }

    @Test("the key with another body is 409 idempotency_key_reused and stores nothing")
    func reuseWithAnotherBodyConflicts() async throws {
        try await withBothTransports { client, fixture, transport in
            try await Self.registerTwo(client)
            #expect(try await client.submit(Self.body, keys: ["k1"]).status == .accepted, "\(transport)")
            for other in [
                #"{"groups": ["news"], "payload": {"aps": {"alert": "hi"}}}"#,
                // The same request, serialised differently: the fingerprint is of the bytes sent.
                #"{"payload": {"aps": {"alert": "hi"}}, "groups": ["news", "nothing"]}"#,
            ] {
                let conflict = try await client.submit(other, keys: ["k1"])
                #expect(conflict.status == .conflict, "\(transport)")
                #expect(conflict.error.code == "idempotency_key_reused", "\(transport)")
                #expect(conflict.error.field == "Idempotency-Key", "\(transport)")
            }
            #expect(fixture.intake.submitted.count == 3, "\(transport)")
            for id in ["req-2", "req-3"] {
                #expect(try await fixture.store.request(PushgateCore.RequestID(id)) == nil, "\(transport): \(id)")
            }
            // The first request is untouched, and its retry is still answered.
            let retry = try await client.submit(Self.body, keys: ["k1"])
            #expect(retry.status == .accepted, "\(transport)")
            #expect(retry.json["id"] as? String == "req-1", "\(transport)")
        }
    }

    @Test("after 24 h the key names nothing: the same key is a new request")
    func keyExpiresAfterTheWindow() async throws {
        try await withRouterClient { client, fixture in
            try await Self.registerTwo(client)
            #expect(try await client.submit(Self.body, keys: ["k1"]).json["id"] as? String == "req-1")
            fixture.clock.advance(by: 24 * 3600)
            let later = try await client.submit(Self.body, keys: ["k1"])
            #expect(later.status == .accepted)
            #expect(later.json["id"] as? String == "req-2")
            #expect(try await fixture.store.request(PushgateCore.RequestID("req-2")) != nil)
        }
    }

    @Test("the same key for two apps is two requests")
    func keysArePerApp() async throws {
        try await withBothTransports(apps: ["news", "weather"]) { client, fixture, transport in
            try await Self.registerTwo(client, app: "news")
            try await Self.registerTwo(client, app: "weather")
            let news = try await client.submit(#"{"app": "news", "groups": ["news"], "payload": {}}"#, keys: ["k1"])
            let weather = try await client.submit(
                #"{"app": "weather", "groups": ["news"], "payload": {}}"#,
                keys: ["k1"]
            )
            #expect(news.status == .accepted, "\(transport)")
            #expect(weather.status == .accepted, "\(transport)")
            #expect(news.json["id"] as? String == "req-1", "\(transport)")
            #expect(weather.json["id"] as? String == "req-2", "\(transport)")
            #expect(try await fixture.store.request(PushgateCore.RequestID("req-2"))?.app == "weather", "\(transport)")
        }
    }

    @Test(
        "a key that is empty, too long, not printable ASCII, or given twice is 400 naming the header; nothing is stored"
    )
    func badKeysAreRefused() async throws {
        try await withBothTransports { client, fixture, transport in
            try await Self.registerTwo(client)
            let cases: [(keys: [String], what: String)] = [
                ([""], "empty"),
                ([String(repeating: "k", count: 256)], "256 characters"),
                (["a\tb"], "a tab"),
                (["clé"], "not ASCII"),
                (["k1", "k1"], "given twice"),
            ]
            for (keys, what) in cases {
                let response = try await client.submit(Self.body, keys: keys)
                #expect(response.status == .badRequest, "\(transport): \(what)")
                #expect(response.error.code == "invalid_idempotency_key", "\(transport): \(what)")
                #expect(response.error.field == "Idempotency-Key", "\(transport): \(what)")
            }
            #expect(fixture.intake.submitted.isEmpty, "\(transport): nothing reached the intake")
            let longest = try await client.submit(Self.body, keys: [String(repeating: "~", count: 255)])
            #expect(longest.status == .accepted, "\(transport): 255 printable characters are a key")
            #expect(longest.json["id"] as? String == "req-1", "\(transport): the first request stored")
        }
    }
}

@Suite("Idempotency keys: the rule")
struct IdempotencyKeyTests {
    @Test("1-255 characters of 0x20-0x7E, not beginning or ending with a space")
    func rule() throws {
        for valid in ["k", "order 4711", "~!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}", String(repeating: "a", count: 255)] {
            #expect(try IdempotencyKey(valid).value == valid)
        }
        for invalid in ["", " k", "k ", "a\u{7f}", "a\u{0}b", "a\nb", "ключ", String(repeating: "a", count: 256)] {
            #expect(throws: ValidationError(code: .invalidIdempotencyKey, field: "Idempotency-Key", message: "")) {
                try IdempotencyKey(invalid)
            }
        }
    }

    @Test("the key never appears in its description (it is the client's)")
    func descriptionHidesTheKey() throws {
        #expect(!"\(try IdempotencyKey("secret-order-4711"))".contains("secret"))
    }

    @Test("the fingerprint is the SHA-256 of the bytes sent")
    func fingerprint() throws {
        let key = try IdempotencyKey("k")
        let a = Idempotency(key: key, requestBytes: Array(#"{"a": 1}"#.utf8))
        #expect(a.fingerprint.count == Idempotency.fingerprintLength)
        #expect(a == Idempotency(key: key, requestBytes: Array(#"{"a": 1}"#.utf8)))
        #expect(a != Idempotency(key: key, requestBytes: Array(#"{"a":1}"#.utf8)))
    }
}
