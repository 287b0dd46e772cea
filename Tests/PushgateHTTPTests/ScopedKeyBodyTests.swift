import Foundation
import Hummingbird
import Logging
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
                    uri: "/v1/notifications", method: .post,
                    headers: [.authorization: "Bearer \(TestKeys.news)", .contentType: "application/json"],
                    body: ByteBuffer(bytes: bytes))
                #expect([.badRequest, .forbidden].contains(response.status), "\(name): \(response.status)")
                #expect(try await fixture.store.request(PushgateCore.RequestID("req-1")) == nil, "\(name)")
            }
        }
    }

    @Test(
        "the access check alone refuses every ambiguous body, even in front of a route that would take it",
        arguments: ambiguous.indices)
    func checkRefusesOnItsOwn(index: Int) async throws {
        let (name, bytes) = Self.ambiguous[index]
        try await withKeyedAPI { fixture in
            // A route that accepts whatever reaches it: only the access check stands between the key and
            // the other app.
            let router = Router(context: BasicRequestContext.self)
            router.add(
                middleware: APIErrorMiddleware(
                    logger: Logger(label: "test"), routes: RouteTable([]),
                    storeFailures: SharedFailureStorm(clock: fixture.clock)))
            router.add(
                middleware: APIKeyMiddleware(
                    keyring: APIKeyring(TestKeys.configured), apps: AppNames(["news", "weather"]),
                    store: fixture.store, maximumBodyBytes: 4096))
            router.post("v1/notifications") { _, _ in Response(status: .accepted) }
            try await Application(router: router).test(.router) { client async throws in
                let response = try await client.execute(
                    uri: "/v1/notifications", method: .post,
                    headers: [.authorization: "Bearer \(TestKeys.news)", .contentType: "application/json"],
                    body: ByteBuffer(bytes: bytes))
                #expect([.badRequest, .forbidden].contains(response.status), "\(name): \(response.status)")
                let own = Array(#"{"app": "news", \#(Self.rest)}"#.utf8)
                let allowed = try await client.execute(
                    uri: "/v1/notifications", method: .post,
                    headers: [.authorization: "Bearer \(TestKeys.news)"], body: ByteBuffer(bytes: own))
                #expect(allowed.status == .accepted, "the key's own app passes")
            }
        }
    }

    @Test("the app the access check sees is the app the route stores, or both refuse with the same error")
    func sameAppAsTheRoute() throws {
        let apps = AppNames(["news", "weather"])
        let id = try PushgateCore.RequestID("req-1")
        let valid = [
            Array(#"{"app": "news", \#(Self.rest)}"#.utf8),
            Array(#"{"app": "weather", \#(Self.rest)}"#.utf8),
            Array(#" {"\u0077eather": 1, "app": "weather"} "#.utf8),
        ]
        for bytes in Self.ambiguous.map(\.bytes) + valid {
            let parsed: Result<String, APIError> = Result { () throws(APIError) in
                try NotificationBody.parse(bytes, apps: apps, id: id, receivedAt: APIFixture.start).app
            }
            let checked: Result<String, APIError> = Result { () throws(APIError) in
                try NotificationBody.app(bytes, apps: apps)
            }
            switch (parsed, checked) {
            case (.success(let stored), .success(let seen)): #expect(stored == seen)
            case (.failure(let route), .failure(let check)): #expect(route == check)
            case (.failure, .success(let seen)):
                // The check may pass a body the route then refuses for another field, never another app.
                #expect(["news", "weather"].contains(seen))
            case (.success(let stored), .failure(let check)):
                Issue.record("the check refused (\(check)) a body the route stores for \(stored)")
            }
        }
    }
}
