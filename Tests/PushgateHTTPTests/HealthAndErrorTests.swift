import Foundation
import Hummingbird
import HummingbirdTesting
import PushgateCore
import PushgateHTTP
import Testing

@Suite("HTTP API: health, readiness, unknown routes, configuration")
struct HealthAndErrorTests {
    @Test("GET /healthz answers 200 {\"status\": \"ok\"}")
    func healthz() async throws {
        try await withRouterClient { client, _ in
            let response = try await client.send(.get, "/healthz")
            #expect(response.status == .ok)
            #expect(response.json["status"] as? String == "ok")
        }
    }

    @Test("GET /readyz answers 200 while the store answers, 503 store_unavailable once it does not")
    func readyz() async throws {
        try await withRouterClient { client, fixture in
            #expect(try await client.send(.get, "/readyz").status == .ok)
            try fixture.store.close()
            let response = try await client.send(.get, "/readyz")
            #expect(response.status == .serviceUnavailable)
            #expect(response.error.code == "store_unavailable")
        }
    }

    @Test("an unknown route is 404 not_found in the JSON error shape")
    func unknownRoute() async throws {
        try await withRouterClient { client, _ in
            let response = try await client.send(.get, "/v2/anything")
            #expect(response.status == .notFound)
            #expect(response.error.code == "not_found")
            #expect((response.json["error"] as? [String: Any])?["field"] is NSNull)
        }
    }

    @Test("a store failure during a request is 503 store_unavailable")
    func storeFailure() async throws {
        try await withRouterClient { client, fixture in
            try fixture.store.close()
            let response = try await client.send(.put, "/v1/apps/default/groups/news/devices/\(tokenA)")
            #expect(response.status == .serviceUnavailable)
            #expect(response.error.code == "store_unavailable")
        }
    }

    @Test("configuration errors name the key")
    func configurationErrors() async throws {
        let bad: [(HTTPAPI.Configuration, String)] = [
            (.init(port: 70000), "port"),
            (.init(port: -1), "port"),
            (.init(host: ""), "host"),
            (.init(apps: []), "apps"),
            (.init(apps: ["a", "a"]), "apps"),
            (.init(apps: [""]), "apps"),
            (.init(maximumBodyBytes: 10), "maximumBodyBytes"),
        ]
        for (configuration, key) in bad {
            #expect(throws: HTTPAPIConfigurationError.self) { try configuration.validate() }
            do {
                try configuration.validate()
            } catch {
                #expect(error.key == key)
            }
        }
        #expect(HTTPAPI.Configuration().port == 7880)
        #expect(HTTPAPI.Configuration().apps == ["default"])
    }
}
