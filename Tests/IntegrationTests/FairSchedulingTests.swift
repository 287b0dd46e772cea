import Foundation
import PushgateCore
import PushgateSQLite
import Testing

@testable import PushgateDispatch

/// Head of line: a one-device request sent during a broadcast is delivered before the broadcast's
/// remaining chunks (``ClaimScheduler``), judged by the order the transport saw, not by time.
@Suite("Dispatcher: a small request passes a broadcast's remaining chunks", .timeLimit(.minutes(2)))
struct FairSchedulingTests {
    @Test(
        "a one-device request submitted while a broadcast's answers are held is sent before the broadcast's next chunks"
    )
    func oneDeviceRequestPassesABroadcast() async throws {
        let directory = try TemporaryDirectory()
        let sqlite = try SQLiteStore(path: directory.path("fair.db"))
        defer { try? sqlite.close() }
        let now = Date()
        let token = DispatcherPipelineTests.token
        _ = try await sqlite.register(batch: (1...60).map { Registration(token: token($0), group: "all", at: now) })
        _ = try await sqlite.register(Registration(token: token(1_000), group: "one", at: now))
        // Chunks of 10 and room for 10 unanswered: the broadcast's first chunk fills the budget.
        let transport = HeldAnswersTransport(capacity: 10)
        var configuration = Dispatcher.Configuration(instanceID: InstanceID("fair"))
        configuration.chunkSize = 10
        configuration.pageSize = 10
        configuration.idleInterval = .milliseconds(50)
        configuration.shutdownGracePeriod = .milliseconds(100)
        let dispatcher = Dispatcher(
            store: sqlite,
            routes: [
                Registration.defaultApp: DeliveryRoute(transport: transport, topic: try Topic("com.example.fair"))
            ],
            configuration: configuration,
            logger: TestLogger.make("dispatch")
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await dispatcher.run() }
            let payload = try Payload(jsonString: #"{"aps":{"alert":"hi"}}"#)
            let broadcast = try RequestID("broadcast")
            _ = try await dispatcher.submit(
                NotificationRequest(id: broadcast, groups: ["all"], payload: payload, createdAt: now)
            )
            try await eventually("the broadcast's first chunk fills the budget") { transport.submitted == 10 }
            let single = try RequestID("single")
            _ = try await dispatcher.submit(
                NotificationRequest(id: single, groups: ["one"], payload: payload, createdAt: now)
            )
            while transport.submitted < 61 {
                let before = transport.submitted
                transport.answerAll()
                try await eventually("more sent") { transport.submitted > before }
            }
            transport.answerAll()
            try await eventually("both done") {
                let states = [try await sqlite.report(broadcast)?.state, try await sqlite.report(single)?.state]
                return states == [.done, .done]
            }
            let order = transport.submittedTokens
            let position = try #require(order.firstIndex(of: token(1_000)))
            // Claimed when it arrived: the broadcast's first chunk, perhaps its second. Claiming in request
            // order, the single would come after all 60 broadcast devices.
            #expect(position <= 20, "sent at \(position) of \(order.count)")
            #expect(Set(order).count == 61, "every device once")
            group.cancelAll()
        }
    }

    @Test(
        "a one-device request submitted while a broadcast's chunk is still sending is claimed with its enqueue and sent first"
    )
    func oneDeviceRequestPassesAChunkStillSending() async throws {
        let directory = try TemporaryDirectory()
        let sqlite = try SQLiteStore(path: directory.path("sending.db"))
        defer { try? sqlite.close() }
        let store = FaultInjectingStore(base: sqlite)
        let now = Date()
        let token = DispatcherPipelineTests.token
        _ = try await store.register(batch: (1...80).map { Registration(token: token($0), group: "all", at: now) })
        _ = try await store.register(Registration(token: token(1_000), group: "one", at: now))
        // Chunks of 40 read in pages of 10, room for 10 unanswered: the broadcast's first chunk has 30
        // targets left to send while its first 10 wait for answers.
        let transport = HeldAnswersTransport(capacity: 10)
        var configuration = Dispatcher.Configuration(instanceID: InstanceID("sending"))
        configuration.chunkSize = 40
        configuration.pageSize = 10
        configuration.idleInterval = .milliseconds(50)
        configuration.shutdownGracePeriod = .milliseconds(100)
        let dispatcher = Dispatcher(
            store: store,
            routes: [
                Registration.defaultApp: DeliveryRoute(transport: transport, topic: try Topic("com.example.fair"))
            ],
            configuration: configuration,
            logger: TestLogger.make("dispatch")
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await dispatcher.run() }
            let payload = try Payload(jsonString: #"{"aps":{"alert":"hi"}}"#)
            let broadcast = try RequestID("broadcast")
            _ = try await dispatcher.submit(
                NotificationRequest(id: broadcast, groups: ["all"], payload: payload, createdAt: now)
            )
            try await eventually("the broadcast's first chunk fills the budget") { transport.submitted == 10 }
            // The loop opens the hand-off once the chunk has started; it stays open while nothing changes
            // (no answer comes before ``HeldAnswersTransport/answerAll()``).
            try await eventually("the hand-off is open") {
                dispatcher.handOffOpen.load(ordering: .sequentiallyConsistent)
            }
            let claimedBefore = store.chunksClaimedWithEnqueue
            let single = try RequestID("single")
            _ = try await dispatcher.submit(
                NotificationRequest(id: single, groups: ["one"], payload: payload, createdAt: now)
            )
            // Claimed in its own enqueue's transaction, though the broadcast's chunk is not all sent.
            #expect(store.chunksClaimedWithEnqueue == claimedBefore + 1)
            while transport.submitted < 81 {
                let before = transport.submitted
                transport.answerAll()
                try await eventually("more sent") { transport.submitted > before }
            }
            transport.answerAll()
            try await eventually("both done") {
                let states = [try await store.report(broadcast)?.state, try await store.report(single)?.state]
                return states == [.done, .done]
            }
            let order = transport.submittedTokens
            let position = try #require(order.firstIndex(of: token(1_000)))
            // Handed over before its submit returned, it starts at the loop's next turn (``DispatchLoop``),
            // and is offered room before the broadcast's chunks: the first room freed goes to it, or the
            // second if the loop's turn under way when it was handed over was about to advance. Waiting
            // for the chunk to be all sent, it would come after the broadcast's first 40 devices.
            #expect(position <= 20, "sent at \(position) of \(order.count)")
            #expect(Set(order).count == 81, "every device once")
            group.cancelAll()
        }
    }
}
