import Foundation
import PushgateCore
import PushgateSQLite
import Testing

@testable import PushgateDispatch

/// Head of line: a one-device request sent during a broadcast is delivered before the broadcast's
/// remaining chunks (``ClaimScheduler``), judged by the order the transport saw, not by time.
@Suite("Dispatcher: a small request passes a broadcast's remaining chunks", .timeLimit(.minutes(2)))
struct FairSchedulingTests {
    /// A running dispatcher over a fresh store with `devices` devices in group `all` and one (device
    /// 1,000) in group `one`; chunks of `chunkSize` read in pages of 10, and room for 10 unanswered sends,
    /// whose answers the transport holds until asked.
    struct HeldBroadcast {
        static let single = DispatcherPipelineTests.token(1_000)

        let store: FaultInjectingStore
        let transport: HeldAnswersTransport
        let dispatcher: Dispatcher
        let devices: Int
        let payload: Payload
        let broadcast: RequestID
        let single: RequestID

        static func run(
            devices: Int,
            chunkSize: Int,
            _ body: (HeldBroadcast) async throws -> Void
        ) async throws {
            let directory = try TemporaryDirectory()
            let sqlite = try SQLiteStore(path: directory.path("fair.db"))
            defer { try? sqlite.close() }
            let store = FaultInjectingStore(base: sqlite)
            let now = Date()
            let token = DispatcherPipelineTests.token
            _ = try await store.register(
                batch: (1...devices).map { Registration(token: token($0), group: "all", at: now) }
            )
            _ = try await store.register(Registration(token: Self.single, group: "one", at: now))
            let transport = HeldAnswersTransport(capacity: 10)
            var configuration = Dispatcher.Configuration(instanceID: InstanceID("fair"))
            configuration.chunkSize = chunkSize
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
            let fixture = HeldBroadcast(
                store: store,
                transport: transport,
                dispatcher: dispatcher,
                devices: devices,
                payload: try Payload(jsonString: #"{"aps":{"alert":"hi"}}"#),
                broadcast: try RequestID("broadcast"),
                single: try RequestID("single")
            )
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await dispatcher.run() }
                try await body(fixture)
                group.cancelAll()
            }
        }

        /// Submits the broadcast and waits until its first sends fill the room.
        func submitBroadcast() async throws {
            _ = try await dispatcher.submit(
                NotificationRequest(id: broadcast, groups: ["all"], payload: payload, createdAt: Date())
            )
            try await eventually("the broadcast's first chunk fills the budget") { transport.submitted == 10 }
        }

        func submitSingle() async throws {
            _ = try await dispatcher.submit(
                NotificationRequest(id: single, groups: ["one"], payload: payload, createdAt: Date())
            )
        }

        /// Answers whatever is held until both requests are done; the position of the single's send among
        /// all the transport saw.
        func answerUntilDone() async throws -> Int {
            while transport.submitted < devices + 1 {
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
            #expect(Set(order).count == devices + 1, "every device once")
            return try #require(order.firstIndex(of: Self.single))
        }
    }

    @Test(
        "a one-device request submitted while a broadcast's answers are held is sent before the broadcast's next chunks"
    )
    func oneDeviceRequestPassesABroadcast() async throws {
        // Chunks of 10 and room for 10 unanswered: the broadcast's first chunk fills the budget.
        try await HeldBroadcast.run(devices: 60, chunkSize: 10) { fixture in
            try await fixture.submitBroadcast()
            try await fixture.submitSingle()
            let position = try await fixture.answerUntilDone()
            // Claimed when it arrived: the broadcast's first chunk, perhaps its second. Claiming in request
            // order, the single would come after all 60 broadcast devices.
            #expect(position <= 20, "sent at \(position) of 61")
        }
    }

    @Test(
        "a one-device request submitted while a broadcast's chunk is still sending is claimed with its enqueue and sent first"
    )
    func oneDeviceRequestPassesAChunkStillSending() async throws {
        // Chunks of 40 read in pages of 10, room for 10 unanswered: the broadcast's first chunk has 30
        // targets left to send while its first 10 wait for answers.
        try await HeldBroadcast.run(devices: 80, chunkSize: 40) { fixture in
            try await fixture.submitBroadcast()
            // The loop opens the hand-off once the chunk has started; it stays open while nothing changes
            // (no answer comes before ``HeldAnswersTransport/answerAll()``).
            try await eventually("the hand-off is open") {
                fixture.dispatcher.handOffIsOpen
            }
            let claimedBefore = fixture.store.chunksClaimedWithEnqueue
            try await fixture.submitSingle()
            // Claimed in its own enqueue's transaction, though the broadcast's chunk is not all sent.
            #expect(fixture.store.chunksClaimedWithEnqueue == claimedBefore + 1)
            let position = try await fixture.answerUntilDone()
            // Handed over before its submit returned, it starts at the loop's next turn (``DispatchLoop``),
            // and is offered room before the broadcast's chunks: the first room freed goes to it, or the
            // second if the loop's turn under way when it was handed over was about to advance. Waiting
            // for the chunk to be all sent, it would come after the broadcast's first 40 devices.
            #expect(position <= 20, "sent at \(position) of 81")
        }
    }
}
