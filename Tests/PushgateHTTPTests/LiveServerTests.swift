import Foundation
import Hummingbird
import HummingbirdTesting
import PushgateCore
import PushgateHTTP
import Synchronization
import Testing

@Suite("HTTP API over a live socket")
struct LiveServerTests {
    @Test("on port 0 it binds a free port, reports it, and serves register, notify and report")
    func liveRoundTrip() async throws {
        let bound = Mutex<Int?>(nil)
        try await withAPI(port: 0, onBound: { port in bound.withLock { $0 = port } }) { fixture in
            try await fixture.api.buildApplication().test(.live) { client in
                let port = try #require(client.port)
                #expect(port > 0)
                #expect(bound.withLock { $0 } == port)

                #expect(try await client.send(.put, "/v1/groups/news/devices/\(tokenA)").status == .noContent)
                let submitted = try await client.send(
                    .post,
                    "/v1/notifications",
                    json: #"{"groups": ["news"], "type": "normal", "payload": {"aps": {}}}"#
                )
                #expect(submitted.status == .accepted)
                #expect(submitted.json["targets"] as? Int == 1)
                let id = try #require(submitted.json["id"] as? String)
                let report = try await client.send(.get, "/v1/notifications/\(id)")
                #expect(report.status == .ok)
                #expect(report.json["state"] as? String == "queued")

                let bad = try await client.send(.post, "/v1/notifications", json: #"{"groups": ["news"]"#)
                #expect(bad.status == .badRequest)
                #expect(bad.error.code == "malformed_json")
                let unknownApp = try await client.send(.get, "/v1/apps/nope/devices/\(tokenA)")
                #expect(unknownApp.status == .notFound)
                #expect(unknownApp.error.code == "unknown_app")
                #expect(try await client.send(.get, "/healthz").status == .ok)
            }
        }
    }

    @Test("run() serves on the configured port until cancelled")
    func runAndCancel() async throws {
        let bound = AsyncStream<Int>.makeStream()
        try await withAPI(port: 0, onBound: { port in bound.continuation.yield(port) }) { fixture in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await fixture.api.run() }
                var ports = bound.stream.makeAsyncIterator()
                let port = try #require(await ports.next())
                #expect(port > 0)
                group.cancelAll()
                try? await group.waitForAll()
            }
        }
    }
}
