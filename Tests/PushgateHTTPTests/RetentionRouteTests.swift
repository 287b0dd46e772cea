import Foundation
import Hummingbird
import HummingbirdTesting
import PushgateCore
import PushgateHTTP
import PushgateSQLite
import Testing

@Suite("HTTP API: reports after retention")
struct RetentionRouteTests {
    @Test("a request deleted by retention answers 404 unknown_notification, as an id never stored")
    func reportAfterRetention() async throws {
        try await withRouterClient { client, fixture in
            let id = try #require(
                try await client.send(.post, "/v1/notifications", json: #"{"devices": ["\#(tokenA)"], "payload": {}}"#)
                    .json["id"] as? String
            )
            // Delivered, as a dispatcher would: the request is done at the fixture's clock.
            let lease = LeaseWindow(owner: InstanceID("test"), now: fixture.clock.now(), duration: .seconds(30))
            let chunk = try #require(try await fixture.store.claimChunk(lease, chunkSize: 10))
            let page = try await fixture.store.targets(of: chunk, after: chunk.progress, limit: 10)
            var progress = ChunkProgress(chunk: chunk, through: page.scannedThrough, completesChunk: true)
            progress.accepted = page.targets.count
            _ = try await fixture.store.recordProgress(progress, renewing: lease)
            let done = try await client.send(.get, "/v1/notifications/\(id)")
            #expect(done.status == .ok)
            #expect(done.json["state"] as? String == "done")

            let retention = LedgerRetention.Configuration(retention: .seconds(7 * 24 * 3600))
            fixture.clock.advance(by: 7 * 24 * 3600 + 1)
            let pass = try await LedgerPruner(store: fixture.store, configuration: retention)
                .prune(now: fixture.clock.now())
            #expect(pass.summary.requests == 1)
            let gone = try await client.send(.get, "/v1/notifications/\(id)")
            #expect(gone.status == .notFound)
            #expect(gone.error.code == "unknown_notification")
            #expect(gone.error.field == "id")
        }
    }
}
