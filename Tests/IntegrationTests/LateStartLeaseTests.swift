import APNsHTTP2
import Foundation
import PushTransport
import PushgateCore
import PushgateDispatch
import PushgateSQLite
import Testing

/// A chunk that waited between its claim and its start (a failed start, a hand-over) has less of its
/// lease left: its renewals count from when the lease was taken, not from the start.
@Suite("Dispatcher: a chunk started late renews its lease in time", .timeLimit(.minutes(2)))
struct LateStartLeaseTests {
    static func token(_ number: Int) -> DeviceToken {
        try! DeviceToken(hex: String(format: "%064x", 0xD1_0000 + number))
    }

    @Test("a chunk whose start failed and waited 20 s of its 30 s lease renews it as soon as it starts")
    func lateStartRenewsAtOnce() async throws {
        let clock = ManualWallClock(Date())
        let directory = try TemporaryDirectory()
        let sqlite = try SQLiteStore(path: directory.path("late.db"))
        defer { try? sqlite.close() }
        // The first read of the request fails: the claimed chunk waits, still leased, for the next try.
        let store = FaultInjectingStore(base: sqlite, fault: .init(operation: .readRequest, call: 1))
        _ = try await store.register(
            batch: (1...5).map { Registration(token: Self.token($0), group: "g", at: clock.now()) }
        )
        // Stored behind the dispatcher's back, so that its start has to read the request.
        let id = try await store.enqueue(
            NotificationRequest(
                id: try RequestID("late"),
                groups: ["g"],
                payload: Payload.alert("hi"),
                createdAt: clock.now()
            )
        ).id
        let transport = HeldAnswersTransport()
        var configuration = Dispatcher.Configuration(instanceID: InstanceID("late"))
        configuration.leaseDuration = .seconds(30)
        configuration.idleInterval = .milliseconds(20)
        configuration.shutdownGracePeriod = .milliseconds(100)
        let dispatcher = Dispatcher(
            store: store,
            routes: [
                Registration.defaultApp: DeliveryRoute(transport: transport, topic: try Topic("com.example.late"))
            ],
            configuration: configuration,
            clock: clock,
            logger: TestLogger.make("dispatch")
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await dispatcher.run() }
            defer {
                // On a failure: back-offs and the stop's grace period run on this clock; let them end.
                transport.answerAll()
                clock.advance(by: 3_600)
                group.cancelAll()
            }
            try await eventually("the start failed") { store.injected }
            #expect(store.chunksClaimed == 1)
            #expect(transport.submitted == 0)
            // The store back-off (on this clock) and two thirds of the lease go by before the next try.
            clock.advance(by: 20)
            try await eventually("sent") { transport.submitted == 5 }
            // No answer has come and the clock stands still: only a renewal due since the claim records.
            try await eventually("the lease renewed") { (store.calls[.recordProgress] ?? 0) >= 1 }
            #expect(try await store.report(id)?.accepted == 0)
            #expect(store.chunksClaimed == 1, "nobody took the chunk over")
            // Finished before the end: a stop's grace period and back-offs run on this clock, which stands still.
            transport.answerAll()
            try await eventually("done") { try await store.report(id)?.state == .done }
            #expect(try await store.report(id)?.accepted == 5)
        }
    }
}
