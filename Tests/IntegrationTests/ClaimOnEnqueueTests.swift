import APNsHTTP2
import APNsTransport
import Foundation
import PushTransport
import PushgateCore
import PushgateSQLite
import Synchronization
import Testing

@testable import PushgateDispatch

/// A request submitted to a dispatcher with nothing under way is stored, claimed and paged in one store
/// transaction, and handed to the loop (the path of one notification's latency).
@Suite("Dispatcher: work claimed with the enqueue", .timeLimit(.minutes(2)))
struct ClaimOnEnqueueTests {
    static func token(_ number: Int) -> DeviceToken {
        try! DeviceToken(hex: String(format: "%064x", 0xC1_0000 + number))
    }

    /// Holds every answer until the test releases it, and notes the store's claim and page-read counts
    /// when each request was handed to it.
    final class ProbeTransport: APNsNotificationTransport {
        let held = HeldAnswersTransport()
        let store: FaultInjectingStore
        private let seen = Mutex<[(claims: Int, pageReads: Int)]>([])

        init(store: FaultInjectingStore) { self.store = store }

        var inFlightCapacity: Int { held.inFlightCapacity }

        func submit(_ requests: [APNsRequest]) -> [UInt64] {
            let calls = store.calls
            seen.withLock { $0.append((calls[.claimChunk] ?? 0, calls[.readTargets] ?? 0)) }
            return held.submit(requests)
        }

        func withdraw(_ ids: some Sequence<UInt64>) -> Int { 0 }

        /// The store's counts at each submission, in order.
        var submissions: [(claims: Int, pageReads: Int)] { seen.withLock { $0 } }
    }

    static func request(_ name: String) -> NotificationRequest {
        NotificationRequest(
            id: try! RequestID(name),
            groups: ["g"],
            payload: Payload.alert("hi"),
            createdAt: Date()
        )
    }

    /// A dispatcher on a fresh SQLite store with 3 devices in group `g`, idle (its loop waiting, with an
    /// idle interval longer than any test) when `body` starts.
    static func withIdleDispatcher(
        _ body: (Dispatcher, FaultInjectingStore, ProbeTransport) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory()
        let sqlite = try SQLiteStore(path: directory.path("handoff.db"))
        defer { try? sqlite.close() }
        let store = FaultInjectingStore(base: sqlite)
        _ = try await store.register(batch: (1...3).map { Registration(token: token($0), group: "g", at: Date()) })
        let transport = ProbeTransport(store: store)
        var configuration = Dispatcher.Configuration(instanceID: InstanceID("handoff"))
        configuration.idleInterval = .seconds(600)
        configuration.shutdownGracePeriod = .milliseconds(100)
        let dispatcher = Dispatcher(
            store: store,
            routes: [
                Registration.defaultApp: DeliveryRoute(transport: transport, topic: try Topic("com.example.handoff"))
            ],
            configuration: configuration,
            logger: TestLogger.make("dispatch")
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await dispatcher.run() }
            // Cancellation that lands between the loop's turn and its wait leaves the wait to its (long)
            // timeout; a wake-up ends it, and the cancelled loop then stops.
            defer {
                group.cancelAll()
                dispatcher.wakeUp()
            }
            // The loop asks the store for its next wake-up only when it found nothing to do and is
            // about to wait: from then on it is idle.
            try await eventually("the loop is idle") { (store.calls[.nextWakeUp] ?? 0) >= 1 }
            try await body(dispatcher, store, transport)
        }
    }

    @Test("a request to an idle dispatcher is sent with no claim and no page read of its own")
    func idleDispatcherTakesTheClaimFromTheEnqueue() async throws {
        try await Self.withIdleDispatcher { dispatcher, store, transport in
            let before = store.calls
            let id = try await dispatcher.submit(Self.request("handed")).id
            try await eventually("sent") { transport.held.submitted == 3 }
            let first = try #require(transport.submissions.first)
            #expect(first.claims == before[.claimChunk] ?? 0, "no claim between the enqueue and the send")
            #expect(first.pageReads == before[.readTargets] ?? 0, "no page read between the enqueue and the send")
            #expect(store.chunksClaimedWithEnqueue == 1)

            transport.held.answerAll()
            try await eventually("done") { try await store.report(id)?.state == .done }
            let report = try #require(try await store.report(id))
            #expect(report.accepted == 3)
            #expect(report.failed == 0)
        }
    }

    @Test(
        "while a chunk under way is all sent and waits for answers, a new request's chunk is claimed with its enqueue too"
    )
    func busyDispatcherStillClaimsWithTheEnqueue() async throws {
        try await Self.withIdleDispatcher { dispatcher, store, transport in
            let first = try await dispatcher.submit(Self.request("first")).id
            try await eventually("first sent") { transport.held.submitted == 3 }
            // The first chunk waits for its answers, all sent: the loop would claim next, so it opens the
            // hand-off (at the end of its turn: waited for, not assumed, as the loop may still be in the turn
            // that sent the chunk) and the second request's chunk is claimed in its enqueue's transaction.
            try await eventually("the hand-off is open") {
                dispatcher.handOffIsOpen
            }
            let second = try await dispatcher.submit(Self.request("second")).id
            try await eventually("second sent before any answer") { transport.held.submitted == 6 }
            #expect(store.chunksClaimedWithEnqueue == 2)

            transport.held.answerAll()
            for id in [first, second] {
                try await eventually("\(id) done") { try await store.report(id)?.state == .done }
                #expect(try await store.report(id)?.accepted == 3)
            }
        }
    }

    @Test("submissions one right after another each claim with their enqueue, without waiting for the loop's turn")
    func backToBackSubmissionsAllClaim() async throws {
        try await Self.withIdleDispatcher { dispatcher, store, transport in
            try await eventually("the hand-off is open") { dispatcher.handOffIsOpen }
            // Each answered before the next is submitted, the answers held: the loop may or may not have
            // taken the previous one's chunk when the next arrives. Before ``IntakeHandOff``, a submission
            // that came before the loop's turn found the hand-off closed and left its chunk to the loop.
            var ids: [RequestID] = []
            for number in 1...10 { ids.append(try await dispatcher.submit(Self.request("next-\(number)")).id) }
            #expect(store.chunksClaimedWithEnqueue == 10)
            try await eventually("all sent before any answer") { transport.held.submitted == 30 }

            transport.held.answerAll()
            for id in ids {
                try await eventually("\(id) done") { try await store.report(id)?.state == .done }
            }
        }
    }
}
