import Foundation
import PushgateCore
import PushgateHTTP
import PushgateSQLite
import Testing

/// `/readyz` while the store does not answer at all (its database a black hole): a prompt 503, not a
/// request that hangs until the store's own deadline. The gateway-level check, through a real black hole,
/// is `PostgresFaultTests.blackHole`.
@Suite("Readiness while the store is silent", .timeLimit(.minutes(3)))
struct ReadinessTests {
    @Test("/readyz answers 503 store_unavailable while the store does not answer, 200 once it answers again")
    func silentStore() async throws {
        let directory = try TemporaryDirectory()
        let store = FaultInjectingStore(base: try SQLiteStore(path: directory.path("ready.db")))
        let (ports, bound) = AsyncStream<Int>.makeStream()
        let api = try HTTPAPI(
            configuration: .init(host: "127.0.0.1", port: 0, apps: ["default"]),
            store: store,
            intake: FullDiskIntakeTests.StoreIntake(store: store),
            // A held store never answers, so any deadline shows the 503; the answers around it need one
            // that a store read on a starved test process keeps within (issue #27: 10 s did not).
            monitoring: .init(readinessStoreDeadline: .seconds(30)),
            onBound: { bound.yield($0) }
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await api.run() }
            var iterator = ports.makeAsyncIterator()
            let http = HTTPTestClient(port: try #require(await iterator.next()))
            #expect(try await http.send("GET", "/readyz").status == 200)

            store.holdRequests()
            let silent = try await http.send("GET", "/readyz")
            #expect(silent.status == 503)
            #expect((silent.json["error"] as? [String: Any])?["code"] as? String == "store_unavailable")
            store.releaseRequests()
            #expect(try await http.send("GET", "/readyz").status == 200)
            group.cancelAll()
        }
    }
}
