import Foundation
import Hummingbird
import HummingbirdTesting
import PushgateCore
import PushgateHTTP
import Testing

@Suite("HTTP API: device registry routes")
struct RegistryRouteTests {
    @Test("PUT registers a device in a group, idempotently, with 204")
    func registerIsIdempotent() async throws {
        try await withRouterClient { client, fixture in
            for _ in 0..<2 {
                let response = try await client.send(.put, "/v1/apps/default/groups/news/devices/\(tokenA)")
                #expect(response.status == .noContent)
            }
            let record = try #require(try await fixture.store.device(app: "default", token: DeviceToken(hex: tokenA)))
            #expect(record.groups == ["news"])
            #expect(record.registeredAt == APIFixture.start)
        }
    }

    @Test("upper-case tokens are stored lower-case")
    func upperCaseToken() async throws {
        try await withRouterClient { client, fixture in
            let response = try await client.send(.put, "/v1/apps/default/groups/news/devices/\(tokenA.uppercased())")
            #expect(response.status == .noContent)
            #expect(try await fixture.store.device(app: "default", token: DeviceToken(hex: tokenA)) != nil)
        }
    }

    @Test("GET a device answers its token, state, groups and timestamps")
    func getDevice() async throws {
        try await withRouterClient { client, fixture in
            _ = try await client.send(.put, "/v1/apps/default/groups/news/devices/\(tokenA)")
            _ = try await client.send(.put, "/v1/apps/default/groups/sport/devices/\(tokenA)")
            let response = try await client.send(.get, "/v1/apps/default/devices/\(tokenA)")
            #expect(response.status == .ok)
            let json = response.json
            #expect(json["token"] as? String == tokenA)
            #expect(json["app"] as? String == "default")
            #expect(json["state"] as? String == "valid")
            #expect((json["groups"] as? [String])?.sorted() == ["news", "sport"])
            #expect(json["registered_at"] as? String == "2027-01-15T08:00:00.000Z")
            #expect(json["invalidated_at"] is NSNull)
            #expect(json["reason"] is NSNull)
        }
    }

    @Test("GET an invalidated device answers its invalidation time and reason")
    func getInvalidatedDevice() async throws {
        try await withRouterClient { client, fixture in
            _ = try await client.send(.put, "/v1/apps/default/groups/news/devices/\(tokenA)")
            _ = try await fixture.store.invalidate(
                app: "default",
                token: DeviceToken(hex: tokenA),
                reason: .badDeviceToken,
                appleTimestamp: nil,
                at: APIFixture.start.addingTimeInterval(60)
            )
            let json = try await client.send(.get, "/v1/apps/default/devices/\(tokenA)").json
            #expect(json["state"] as? String == "invalid")
            #expect(json["invalidated_at"] as? String == "2027-01-15T08:01:00.000Z")
            #expect(json["reason"] as? String == "BadDeviceToken")
        }
    }

    @Test("DELETE from a group unassigns (204), then 404 not_a_member")
    func unassign() async throws {
        try await withRouterClient { client, fixture in
            _ = try await client.send(.put, "/v1/apps/default/groups/news/devices/\(tokenA)")
            let first = try await client.send(.delete, "/v1/apps/default/groups/news/devices/\(tokenA)")
            #expect(first.status == .noContent)
            let again = try await client.send(.delete, "/v1/apps/default/groups/news/devices/\(tokenA)")
            #expect(again.status == .notFound)
            #expect(again.error.code == "not_a_member")
            // The device itself stays registered.
            #expect(try await client.send(.get, "/v1/apps/default/devices/\(tokenA)").status == .ok)
        }
    }

    @Test("DELETE a device removes it everywhere (204), then 404 unknown_device")
    func removeDevice() async throws {
        try await withRouterClient { client, _ in
            _ = try await client.send(.put, "/v1/apps/default/groups/news/devices/\(tokenA)")
            _ = try await client.send(.put, "/v1/apps/default/groups/sport/devices/\(tokenA)")
            #expect(try await client.send(.delete, "/v1/apps/default/devices/\(tokenA)").status == .noContent)
            let again = try await client.send(.delete, "/v1/apps/default/devices/\(tokenA)")
            #expect(again.status == .notFound)
            #expect(again.error.code == "unknown_device")
            let lookup = try await client.send(.get, "/v1/apps/default/devices/\(tokenA)")
            #expect(lookup.status == .notFound)
            #expect(lookup.error.code == "unknown_device")
            #expect(lookup.error.field == "token")
        }
    }

    @Test("a group's devices are listed page by page, in a stable order, with a next cursor")
    func pagingAcrossPages() async throws {
        try await withRouterClient { client, _ in
            var registered: [String] = []
            for index in 0..<7 {
                let token = String(format: "%02x", index) + String(repeating: "ab", count: 31)
                registered.append(token)
                #expect(
                    try await client.send(.put, "/v1/apps/default/groups/news/devices/\(token)").status == .noContent
                )
            }
            var seen: [String] = []
            var uri = "/v1/apps/default/groups/news/devices?limit=3"
            var pages = 0
            while true {
                let response = try await client.send(.get, uri)
                #expect(response.status == .ok)
                let json = response.json
                let devices = try #require(json["devices"] as? [[String: Any]])
                #expect(devices.count <= 3)
                seen += devices.compactMap { $0["token"] as? String }
                #expect(devices.allSatisfy { $0["state"] as? String == "valid" && $0["registered_at"] is String })
                pages += 1
                guard let next = json["next"] as? String else {
                    #expect(json["next"] is NSNull)
                    break
                }
                uri = "/v1/apps/default/groups/news/devices?limit=3&after=\(next)"
            }
            #expect(pages == 3)
            #expect(seen.count == 7)
            #expect(Set(seen) == Set(registered))
            // Stable: the same listing again gives the same order.
            let all = try await client.send(.get, "/v1/apps/default/groups/news/devices").json
            #expect((all["devices"] as? [[String: Any]])?.compactMap { $0["token"] as? String } == seen)
            #expect(all["next"] is NSNull)
        }
    }

    @Test("listing an unknown group is 404 unknown_group")
    func unknownGroup() async throws {
        try await withRouterClient { client, _ in
            let response = try await client.send(.get, "/v1/apps/default/groups/nothing/devices")
            #expect(response.status == .notFound)
            #expect(response.error.code == "unknown_group")
            #expect(response.error.field == "group")
        }
    }

    @Test("limit outside 1...1000, or not a number, is 400 invalid_limit; a bad cursor is 400 invalid_cursor")
    func badPagingParameters() async throws {
        try await withRouterClient { client, _ in
            _ = try await client.send(.put, "/v1/apps/default/groups/news/devices/\(tokenA)")
            for limit in ["0", "1001", "abc", "-1"] {
                let response = try await client.send(.get, "/v1/apps/default/groups/news/devices?limit=\(limit)")
                #expect(response.status == .badRequest)
                #expect(response.error.code == "invalid_limit")
                #expect(response.error.field == "limit")
            }
            #expect(try await client.send(.get, "/v1/apps/default/groups/news/devices?limit=1000").status == .ok)
            let cursor = try await client.send(.get, "/v1/apps/default/groups/news/devices?after=not-a-cursor")
            #expect(cursor.status == .badRequest)
            #expect(cursor.error.code == "invalid_cursor")
            #expect(cursor.error.field == "after")
        }
    }

    @Test("an unknown app is 404 unknown_app on every registry route")
    func unknownApp() async throws {
        try await withRouterClient { client, fixture in
            let routes: [(HTTPRequest.Method, String)] = [
                (.put, "/v1/apps/other/groups/news/devices/\(tokenA)"),
                (.delete, "/v1/apps/other/groups/news/devices/\(tokenA)"),
                (.delete, "/v1/apps/other/devices/\(tokenA)"),
                (.get, "/v1/apps/other/devices/\(tokenA)"),
                (.get, "/v1/apps/other/groups/news/devices"),
            ]
            for (method, uri) in routes {
                let response = try await client.send(method, uri)
                #expect(response.status == .notFound, "\(method) \(uri)")
                #expect(response.error.code == "unknown_app")
                #expect(response.error.field == "app")
            }
            #expect(try await fixture.store.device(app: "other", token: DeviceToken(hex: tokenA)) == nil)
        }
    }

    @Test("a malformed token is 400 invalid_token and nothing is stored")
    func invalidToken() async throws {
        try await withRouterClient { client, fixture in
            for token in ["xyz", "abc", "00", String(repeating: "0", count: 202)] {
                let response = try await client.send(.put, "/v1/apps/default/groups/news/devices/\(token)")
                #expect(response.status == .badRequest)
                #expect(response.error.code == "invalid_token")
                #expect(response.error.field == "token")
            }
            let lookup = try await client.send(.get, "/v1/apps/default/devices/nothex")
            #expect(lookup.error.code == "invalid_token")
            let list = try await client.send(.get, "/v1/apps/default/groups/news/devices")
            #expect(list.error.code == "unknown_group")
            _ = fixture
        }
    }

    @Test("a group name with control characters is 400 invalid_group; percent-encoded names are decoded")
    func groupNames() async throws {
        try await withRouterClient { client, fixture in
            let bad = try await client.send(.put, "/v1/apps/default/groups/a%01b/devices/\(tokenA)")
            #expect(bad.status == .badRequest)
            #expect(bad.error.code == "invalid_group")
            #expect(bad.error.field == "group")
            let spaced = try await client.send(.put, "/v1/apps/default/groups/late%20news/devices/\(tokenA)")
            #expect(spaced.status == .noContent)
            let record = try await fixture.store.device(app: "default", token: DeviceToken(hex: tokenA))
            #expect(record?.groups == ["late news"])
        }
    }

    @Test("with one app, the routes without /apps/{app} serve that app")
    func singleAppForms() async throws {
        try await withRouterClient(apps: ["solo"]) { client, fixture in
            #expect(try await client.send(.put, "/v1/groups/news/devices/\(tokenA)").status == .noContent)
            #expect(try await client.send(.put, "/v1/apps/solo/groups/news/devices/\(tokenB)").status == .noContent)
            let list = try await client.send(.get, "/v1/groups/news/devices").json
            #expect((list["devices"] as? [[String: Any]])?.count == 2)
            #expect(try await client.send(.get, "/v1/devices/\(tokenA)").json["app"] as? String == "solo")
            #expect(try await client.send(.delete, "/v1/groups/news/devices/\(tokenA)").status == .noContent)
            #expect(try await client.send(.delete, "/v1/devices/\(tokenB)").status == .noContent)
            #expect(try await fixture.store.device(app: "solo", token: DeviceToken(hex: tokenB)) == nil)
        }
    }

    @Test("with several apps, the routes without /apps/{app} do not exist")
    func severalApps() async throws {
        try await withRouterClient(apps: ["one", "two"]) { client, fixture in
            let short = try await client.send(.put, "/v1/groups/news/devices/\(tokenA)")
            #expect(short.status == .notFound)
            #expect(short.error.code == "not_found")
            #expect(try await client.send(.put, "/v1/apps/two/groups/news/devices/\(tokenA)").status == .noContent)
            #expect(try await fixture.store.device(app: "two", token: DeviceToken(hex: tokenA)) != nil)
            #expect(try await fixture.store.device(app: "one", token: DeviceToken(hex: tokenA)) == nil)
        }
    }
}
