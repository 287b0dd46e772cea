import Foundation
import Hummingbird
import HummingbirdTesting
import PushgateCore
import Testing

@testable import PushgateHTTP

/// Bodies on which Foundation's lenient `JSONSerialization` and the strict reader disagree (or on which a
/// lenient reader could not tell the app): a key limited to `news` must never act on `weather` with them.
@Suite("API keys: a key limited to one app cannot act on another through an ambiguous body")
struct ScopedKeyBodyTests {
    static let token = AuthRouteTests.token
    static let rest = #""groups": ["g"], "type": "normal", "payload": {"aps": {}}"#

    static let ambiguous: [(name: String, bytes: [UInt8])] = [
        ("duplicate app, news last", Array(#"{"app": "weather", \#(rest), "app": "news"}"#.utf8)),
        ("duplicate app, news first", Array(#"{"app": "news", \#(rest), "app": "weather"}"#.utf8)),
        ("byte order mark", [0xEF, 0xBB, 0xBF] + Array(#"{"app": "weather", \#(rest)}"#.utf8)),
        ("trailing garbage", Array(#"{"app": "weather", \#(rest)} {"app": "news"}"#.utf8)),
        ("app only nested", Array(#"{"groups": ["g"], "payload": {"aps": {}, "app": "news"}}"#.utf8)),
        ("app a number", Array(#"{"app": 1, \#(rest)}"#.utf8)),
        ("app null", Array(#"{"app": null, \#(rest)}"#.utf8)),
        ("app an array", Array(#"{"app": ["news"], \#(rest)}"#.utf8)),
        ("invalid UTF-8 in app", Array(#"{"app": "weather"#.utf8) + [0xFF] + Array(#"", \#(rest)}"#.utf8)),
        ("escaped app", Array(#"{"\u0061pp": "weather", \#(rest)}"#.utf8)),
        ("escaped duplicate", Array(#"{"app": "news", "\u0061pp": "weather", \#(rest)}"#.utf8)),
        ("comment", Array(#"{"app": "weather", /* news */ \#(rest)}"#.utf8)),
        ("trailing comma", Array(#"{"app": "weather", \#(rest),}"#.utf8)),
        ("single quotes", Array(#"{'app': 'weather', \#(rest)}"#.utf8)),
        ("not an object", Array(#"["app", "weather"]"#.utf8)),
        ("empty", []),
    ]

    @Test("every ambiguous body is refused (400 or 403) and nothing is stored", arguments: ambiguous.indices)
    func refused(index: Int) async throws {
        let (name, bytes) = Self.ambiguous[index]
        try await withKeyedAPI { fixture in
            try await fixture.api.buildApplication().test(.router) { client async throws in
                let register = "/v1/apps/weather/groups/g/devices/\(Self.token)"
                #expect(try await client.send(.put, register, key: TestKeys.all).status == .noContent)
                let response = try await client.execute(
                    uri: "/v1/notifications",
                    method: .post,
                    headers: [.authorization: "Bearer \(TestKeys.news)", .contentType: "application/json"],
                    body: ByteBuffer(bytes: bytes)
                )
                #expect([.badRequest, .forbidden].contains(response.status), "\(name): \(response.status)")
                #expect(try await fixture.store.request(PushgateCore.RequestID("req-1")) == nil, "\(name)")
            }
        }
    }

    @Test("the route's one strict parse refuses another app (403) and every ambiguous body (400 or 403)")
    func oneParseDecides() throws {
        let apps = AppNames(["news", "weather"])
        let id = try PushgateCore.RequestID("req-1")
        func parse(_ bytes: [UInt8], scope: String?) throws(APIError) -> NotificationRequest {
            try NotificationBody.parse(bytes, apps: apps, scope: scope, id: id, receivedAt: APIFixture.start)
        }
        for (name, bytes) in Self.ambiguous {
            do {
                let accepted = try parse(bytes, scope: "news")
                Issue.record("\(name): accepted for \(accepted.app)")
            } catch {
                #expect([.badRequest, .forbidden].contains(error.status), "\(name): \(error)")
            }
        }
        let weather = Array(#"{"app": "weather", \#(Self.rest)}"#.utf8)
        #expect(throws: APIError(.forbidden, APIError.Code("forbidden_app"), field: "app", message: "")) {
            try parse(weather, scope: "news")
        }
        #expect(throws: APIError(.forbidden, APIError.Code("forbidden_app"), field: "app", message: "")) {
            try parse(Array(#"{"app": "maps", \#(Self.rest)}"#.utf8), scope: "news")
        }
        #expect(try parse(weather, scope: nil).app == "weather")
        #expect(try parse(Array(#"{"app": "news", \#(Self.rest)}"#.utf8), scope: "news").app == "news")
        let single = AppNames(["news"])
        let implicit = try NotificationBody.parse(
            Array("{\(Self.rest)}".utf8),
            apps: single,
            scope: "news",
            id: id,
            receivedAt: APIFixture.start
        )
        #expect(implicit.app == "news", "with one app, a body that names none is that app's")
    }
}
