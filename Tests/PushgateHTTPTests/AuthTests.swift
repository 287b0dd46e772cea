import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import PushgateCore
import PushgateSQLite
import Testing

@testable import PushgateHTTP

/// Keys of the tests: one for every app, one limited to `news`.
enum TestKeys {
    static let all = "backend-key-0123456789"
    static let news = "news-only-key-0123456789"
    static let configured = [APIKey(secret: all), APIKey(secret: news, app: "news")]
}

/// An API with keys, on a fresh SQLite file.
func withKeyedAPI<R>(
    apps: [String] = ["news", "weather"],
    keys: [APIKey] = TestKeys.configured,
    _ body: (APIFixture) async throws -> R
) async throws -> R {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-auth-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    var logger = Logger(label: "pushgate.http.test")
    logger.logLevel = .warning
    let store = try SQLiteStore(path: folder.appendingPathComponent("pushgate.sqlite").path, logger: logger)
    let clock = ManualWallClock(APIFixture.start)
    let ids = SequentialRequestIDs()
    let intake = StoringIntake(store: store)
    var configuration = HTTPAPI.Configuration(host: "127.0.0.1", port: 0, apps: apps)
    configuration.apiKeys = keys
    let api = try HTTPAPI(
        configuration: configuration,
        store: store,
        intake: intake,
        clock: clock,
        requestIDs: { ids.make($0) },
        logger: logger
    )
    return try await body(APIFixture(store: store, intake: intake, clock: clock, api: api))
}

extension TestClientProtocol {
    func send(
        _ method: HTTPRequest.Method,
        _ uri: String,
        key: String?,
        json: String? = nil,
        scheme: String = "Bearer"
    )
        async throws -> TestResponse
    {
        var headers: HTTPFields = [:]
        if let key { headers[.authorization] = "\(scheme) \(key)" }
        if json != nil { headers[.contentType] = "application/json" }
        return try await execute(uri: uri, method: method, headers: headers, body: json.map { ByteBuffer(string: $0) })
    }
}

@Suite("API keys: the keyring (pure)")
struct APIKeyringTests {
    let keyring = APIKeyring(TestKeys.configured)

    @Test("a configured key is allowed with its app limit; an unknown one is invalid; none is missing")
    func decisions() {
        #expect(keyring.authenticate(authorization: "Bearer \(TestKeys.all)") == .allowed(app: nil))
        #expect(keyring.authenticate(authorization: "Bearer \(TestKeys.news)") == .allowed(app: "news"))
        #expect(
            keyring.authenticate(authorization: "bearer \(TestKeys.news)") == .allowed(app: "news"),
            "the scheme is case-insensitive"
        )
        #expect(keyring.authenticate(authorization: "Bearer \(TestKeys.all)x") == .invalid)
        #expect(keyring.authenticate(authorization: "Bearer \(TestKeys.all.dropLast())") == .invalid)
        #expect(keyring.authenticate(authorization: nil) == .missing)
        #expect(keyring.authenticate(authorization: "Basic dXNlcjpwYXNz") == .missing)
        #expect(keyring.authenticate(authorization: "Bearer ") == .missing)
    }

    @Test("comparison covers every byte and refuses lengths that differ")
    func constantTimeEquals() {
        let digest = Array(repeating: UInt8(7), count: 32)
        #expect(APIKeyring.constantTimeEquals(digest, digest))
        for index in [0, 15, 31] {
            var other = digest
            other[index] ^= 0x80
            #expect(!APIKeyring.constantTimeEquals(digest, other))
        }
        #expect(!APIKeyring.constantTimeEquals(digest, Array(digest.dropLast())))
    }

    @Test("the key is the hash of its UTF-8 bytes (sha256sum of the same text)")
    func hashing() {
        // printf %s backend-key-0123456789 | sha256sum
        let expected = "95f691188978c0ae43ea554626cc672c97a850b5c16f277c993472190d647855"
        #expect(APIKey(secret: TestKeys.all).sha256.map { String(format: "%02x", $0) }.joined() == expected)
        #expect(APIKey(secret: TestKeys.all) != APIKey(secret: TestKeys.news))
    }
}

@Suite("API keys: the rules in-process")
struct AuthRouteTests {
    static let token = "aa" + String(repeating: "01", count: 31)

    @Test(
        "/healthz and /readyz stay open; everything under /v1 needs a key: 401 with the error JSON and WWW-Authenticate"
    )
    func unauthorized() async throws {
        try await withKeyedAPI { fixture in
            try await fixture.api.buildApplication().test(.router) { client async throws in
                #expect(try await client.send(.get, "/healthz", key: nil).status == .ok)
                #expect(try await client.send(.get, "/readyz", key: nil).status == .ok)
                for (key, message) in [(nil, "no key"), ("wrong-key-0123456789", "wrong key")] as [(String?, String)] {
                    let response = try await client.send(.put, "/v1/apps/news/groups/g/devices/\(Self.token)", key: key)
                    #expect(response.status == .unauthorized, "\(message)")
                    #expect(response.error.code == "unauthorized", "\(message)")
                    #expect(response.error.field == "authorization", "\(message)")
                    #expect(response.headers[.wwwAuthenticate] == "Bearer", "\(message)")
                    #expect((response.json["error"] as? [String: Any])?["message"] is String)
                }
                let unknownRoute = try await client.send(.get, "/v1/nothing-here", key: nil)
                #expect(unknownRoute.status == .unauthorized, "a keyless caller learns nothing about routes")
                #expect(
                    try await fixture.store.device(app: "news", token: DeviceToken(hex: Self.token)) == nil,
                    "nothing was registered"
                )
            }
        }
    }

    @Test("a key for every app acts on every app")
    func fullKey() async throws {
        try await withKeyedAPI { fixture in
            try await fixture.api.buildApplication().test(.router) { client async throws in
                for app in ["news", "weather"] {
                    let response = try await client.send(
                        .put,
                        "/v1/apps/\(app)/groups/g/devices/\(Self.token)",
                        key: TestKeys.all
                    )
                    #expect(response.status == .noContent)
                }
            }
        }
    }

    @Test("a key limited to one app gets 403 on another app's routes, notifications and reports; nothing is applied")
    func appLimitedKey() async throws {
        try await withKeyedAPI { fixture in
            try await fixture.api.buildApplication().test(.router) { client async throws in
                let register = "/v1/apps/weather/groups/g/devices/\(Self.token)"
                let forbidden = try await client.send(.put, register, key: TestKeys.news)
                #expect(forbidden.status == .forbidden)
                #expect(forbidden.error.code == "forbidden_app")
                #expect(forbidden.error.field == "app")
                #expect(try await fixture.store.device(app: "weather", token: DeviceToken(hex: Self.token)) == nil)
                #expect(
                    try await client.send(.get, "/v1/apps/weather/devices/\(Self.token)", key: TestKeys.news).status
                        == .forbidden
                )
                #expect(
                    try await client.send(.delete, "/v1/apps/weather/devices/\(Self.token)", key: TestKeys.news).status
                        == .forbidden
                )
                #expect(
                    try await client.send(.put, "/v1/apps/news/groups/g/devices/\(Self.token)", key: TestKeys.news)
                        .status == .noContent
                )

                // A weather notification: refused for the news key, before anything is stored.
                #expect(try await client.send(.put, register, key: TestKeys.all).status == .noContent)
                let body = #"{"app": "weather", "groups": ["g"], "type": "normal", "payload": {"aps": {}}}"#
                let refused = try await client.send(.post, "/v1/notifications", key: TestKeys.news, json: body)
                #expect(refused.status == .forbidden)
                #expect(refused.error.code == "forbidden_app")
                #expect(try await fixture.store.request(PushgateCore.RequestID("req-1")) == nil, "nothing was stored")

                let accepted = try await client.send(.post, "/v1/notifications", key: TestKeys.all, json: body)
                #expect(accepted.status == .accepted)
                let weatherID = try #require(accepted.json["id"] as? String)
                #expect(
                    try await client.send(.get, "/v1/notifications/\(weatherID)", key: TestKeys.news).status
                        == .forbidden
                )
                #expect(try await client.send(.get, "/v1/notifications/\(weatherID)", key: TestKeys.all).status == .ok)

                let newsBody = #"{"app": "news", "groups": ["g"], "type": "normal", "payload": {"aps": {}}}"#
                let own = try await client.send(.post, "/v1/notifications", key: TestKeys.news, json: newsBody)
                #expect(own.status == .accepted, "the body read for the check reaches the route intact")
                #expect(own.json["targets"] as? Int == 1)
                let newsID = try #require(own.json["id"] as? String)
                #expect(try await client.send(.get, "/v1/notifications/\(newsID)", key: TestKeys.news).status == .ok)

                let malformed = try await client.send(
                    .post,
                    "/v1/notifications",
                    key: TestKeys.news,
                    json: #"{"app": "#
                )
                #expect(malformed.status == .badRequest, "the route still answers what is wrong with the body")
                #expect(malformed.error.code == "malformed_json")
                let unknownReport = try await client.send(.get, "/v1/notifications/no-such-id", key: TestKeys.news)
                #expect(unknownReport.status == .notFound)
            }
        }
    }

    @Test("with a single app, the app-less routes and an app-less notification are that app's")
    func singleApp() async throws {
        let keys = [APIKey(secret: TestKeys.news, app: "news")]
        try await withKeyedAPI(apps: ["news"], keys: keys) { fixture in
            try await fixture.api.buildApplication().test(.router) { client async throws in
                #expect(
                    try await client.send(.put, "/v1/groups/g/devices/\(Self.token)", key: TestKeys.news).status
                        == .noContent
                )
                let body = #"{"groups": ["g"], "type": "normal", "payload": {"aps": {}}}"#
                #expect(
                    try await client.send(.post, "/v1/notifications", key: TestKeys.news, json: body).status
                        == .accepted
                )
            }
        }
    }

    @Test("a key limited to an app the API does not serve is refused at start-up")
    func keyForUnservedApp() async throws {
        var configuration = HTTPAPI.Configuration(apps: ["news"])
        configuration.apiKeys = [APIKey(secret: TestKeys.news, app: "maps")]
        #expect(throws: HTTPAPIConfigurationError.self) { try configuration.validate() }
    }
}

@Suite("API keys: the rules over a live socket")
struct AuthLiveTests {
    @Test("no key 401, wrong key 401, another app's key 403, the right key 204, /healthz open")
    func live() async throws {
        try await withKeyedAPI { fixture in
            try await fixture.api.buildApplication().test(.live) { client async throws in
                let path = "/v1/apps/weather/groups/g/devices/\(AuthRouteTests.token)"
                #expect(try await client.send(.get, "/healthz", key: nil).status == .ok)
                #expect(try await client.send(.put, path, key: nil).status == .unauthorized)
                #expect(try await client.send(.put, path, key: "not-a-key-0123456789").status == .unauthorized)
                #expect(try await client.send(.put, path, key: TestKeys.news).status == .forbidden)
                #expect(try await client.send(.put, path, key: TestKeys.all).status == .noContent)
            }
        }
    }
}
