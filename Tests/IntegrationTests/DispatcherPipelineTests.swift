import APNsHTTP2
import APNsTransport
import Foundation
import PushTransport
import PushgateCore
import PushgateDispatch
import PushgateSQLite
import Synchronization
import Testing

/// A transport that keeps every request until the test answers it, so that a test sees exactly what
/// the dispatcher had handed over while earlier answers were still outstanding.
final class HeldAnswersTransport: APNsNotificationTransport {
    private struct State {
        var held: [APNsRequest] = []
        var submitted = 0
        /// Every device submitted to, in the order of submission.
        var tokens: [DeviceToken] = []
        var nextID: UInt64 = 0
    }
    private let state = Mutex(State())
    private let capacity: Atomic<Int>
    private let exceeded = Atomic<Bool>(false)

    init(capacity: Int = 1_000) {
        self.capacity = Atomic(capacity)
    }

    /// What this transport says it can carry; a test may change it at any time.
    var inFlightCapacity: Int {
        get { capacity.load(ordering: .relaxed) }
        set { capacity.store(newValue, ordering: .relaxed) }
    }

    /// Set if a submit ever left more requests unanswered than the capacity of that moment.
    var capacityExceeded: Bool { exceeded.load(ordering: .relaxed) }

    func submit(_ requests: [APNsRequest]) -> [UInt64] {
        state.withLock { state in
            state.held.append(contentsOf: requests)
            if state.held.count > inFlightCapacity { exceeded.store(true, ordering: .relaxed) }
            state.submitted += requests.count
            state.tokens += requests.map(\.deviceToken)
            defer { state.nextID += UInt64(requests.count) }
            return (0..<UInt64(requests.count)).map { state.nextID + $0 }
        }
    }

    func withdraw(_ ids: some Sequence<UInt64>) -> Int { 0 }

    var submitted: Int { state.withLock { $0.submitted } }
    var held: Int { state.withLock { $0.held.count } }
    var submittedTokens: [DeviceToken] { state.withLock { $0.tokens } }

    /// Answers every held request with 200, outside the lock (receivers may call back in).
    func answerAll() {
        let requests = state.withLock { state in
            defer { state.held.removeAll() }
            return state.held
        }
        for request in requests {
            request.receiver.receive(
                .answered(status: 200, reason: nil, apnsID: nil, apnsUniqueID: nil, invalidatedAtMilliseconds: nil),
                for: request
            )
        }
    }
}

@Suite("Dispatcher: chunks overlap and pages are read ahead", .timeLimit(.minutes(2)))
struct DispatcherPipelineTests {
    static func token(_ number: Int) -> DeviceToken {
        try! DeviceToken(hex: String(format: "%064x", 0x91_0000 + number))
    }

    /// A dispatcher on a fresh SQLite store whose group `all` holds `devices` devices, sending to a
    /// transport that holds every answer; `body` gets them once a request to `all` was submitted.
    static func withBroadcast(
        devices: Int,
        chunkSize: Int,
        pageSize: Int,
        capacity: Int = 1_000,
        maximumInFlight: Int? = 1_000,
        clock: any WallClock = SystemWallClock(),
        leaseDuration: Duration = .seconds(60),
        metrics: DispatchMetrics = .disabled,
        _ body: (HeldAnswersTransport, FaultInjectingStore, RequestID) async throws -> Void
    ) async throws {
        let transport = HeldAnswersTransport(capacity: capacity)
        try await withBroadcast(
            to: transport,
            devices: devices,
            chunkSize: chunkSize,
            pageSize: pageSize,
            maximumInFlight: maximumInFlight,
            clock: clock,
            leaseDuration: leaseDuration,
            metrics: metrics
        ) { store, id in try await body(transport, store, id) }
    }

    /// A dispatcher on a fresh SQLite store whose group `all` holds `devices` devices, sending to
    /// `transport`; `body` gets the store and the request once a request to `all` was submitted.
    static func withBroadcast(
        to transport: any APNsNotificationTransport,
        devices: Int,
        chunkSize: Int,
        pageSize: Int,
        maximumInFlight: Int? = 1_000,
        clock: any WallClock = SystemWallClock(),
        leaseDuration: Duration = .seconds(60),
        metrics: DispatchMetrics = .disabled,
        _ body: (FaultInjectingStore, RequestID) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory()
        let sqlite = try SQLiteStore(path: directory.path("pipeline.db"))
        defer { try? sqlite.close() }
        // Counts the dispatcher's store calls (no fault injected).
        let store = FaultInjectingStore(base: sqlite)
        let now = Date()
        _ = try await store.register(batch: (1...devices).map { Registration(token: token($0), group: "all", at: now) })
        var configuration = Dispatcher.Configuration(instanceID: InstanceID("pipeline"))
        configuration.chunkSize = chunkSize
        configuration.pageSize = pageSize
        configuration.maximumInFlight = maximumInFlight
        configuration.idleInterval = .milliseconds(50)
        // The test ends with answers still held: nothing to wait for.
        configuration.shutdownGracePeriod = .milliseconds(100)
        configuration.leaseDuration = leaseDuration
        let dispatcher = Dispatcher(
            store: store,
            routes: [
                Registration.defaultApp: DeliveryRoute(transport: transport, topic: try Topic("com.example.pipeline"))
            ],
            configuration: configuration,
            clock: clock,
            logger: TestLogger.make("dispatch"),
            metrics: metrics
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await dispatcher.run() }
            let id = try RequestID("pipeline-\(devices)")
            _ = try await dispatcher.submit(
                NotificationRequest(
                    id: id,
                    groups: ["all"],
                    payload: Payload(jsonString: #"{"aps":{"alert":"hi"}}"#),
                    createdAt: now
                )
            )
            try await body(store, id)
            group.cancelAll()
        }
    }

    @Test(
        "the next chunk is claimed and sent while the previous chunk's answers are outstanding; every device is recorded once"
    )
    func chunksOverlap() async throws {
        try await Self.withBroadcast(devices: 250, chunkSize: 100, pageSize: 30) { transport, store, id in
            // No answer has come back, yet more than one chunk (100 targets each) has been sent: the
            // dispatcher did not wait for a chunk to drain before claiming the next one. Three chunks
            // at most are under way, so all 250 go out.
            try await eventually("all three chunks sent without any answer", timeout: .seconds(60)) {
                transport.submitted == 250
            }
            #expect(transport.held == 250)
            let before = try #require(try await store.report(id))
            #expect(before.accepted == 0)
            #expect(before.state != .done)

            transport.answerAll()
            try await eventually("request done", timeout: .seconds(60)) { try await store.report(id)?.state == .done }
            let report = try #require(try await store.report(id))
            #expect(report.accepted == 250)
            #expect(report.failed == 0)
            #expect(transport.submitted == 250)
        }
    }

    @Test("with three chunks under way and no answer, a fourth waits; it goes out once answers come back")
    func atMostThreeChunks() async throws {
        try await Self.withBroadcast(devices: 400, chunkSize: 100, pageSize: 40) { transport, store, id in
            try await eventually("three chunks sent", timeout: .seconds(60)) { transport.submitted >= 300 }
            // The loop checks expiries once a second, at the start of a turn, before it decides on a
            // claim. Two more checks after every chunk was sent: a whole turn with three chunks under
            // way and nothing to send has decided, and it did not claim a fourth chunk.
            let checks = store.calls[.expireOverdue] ?? 0
            try await eventually("two more turns", timeout: .seconds(60)) {
                (store.calls[.expireOverdue] ?? 0) >= checks + 2
            }
            #expect(store.chunksClaimed == 3)
            #expect(transport.submitted == 300)
            transport.answerAll()
            try await eventually("the fourth chunk sent", timeout: .seconds(60)) { transport.submitted == 400 }
            transport.answerAll()
            try await eventually("request done", timeout: .seconds(60)) { try await store.report(id)?.state == .done }
            #expect(try await store.report(id)?.accepted == 400)
        }
    }

    @Test("a chunk held while its answers are outstanding renews its lease every third of it, on the injected clock")
    func heldChunkRenewsItsLease() async throws {
        let clock = ManualWallClock(Date())
        try await Self.withBroadcast(
            devices: 50,
            chunkSize: 50,
            pageSize: 50,
            clock: clock,
            leaseDuration: .seconds(30)
        ) { transport, store, id in
            // The stop's grace period runs on the manual clock: nothing may stay held when the test ends.
            defer { transport.answerAll() }
            try await eventually("the chunk sent", timeout: .seconds(60)) { transport.submitted == 50 }
            for renewal in 1...3 {
                let records = store.calls[.recordProgress] ?? 0
                clock.advance(by: 10.5)
                try await eventually("renewal \(renewal) recorded", timeout: .seconds(60)) {
                    (store.calls[.recordProgress] ?? 0) > records
                }
            }
            // The answers of the chunk still held are recorded.
            transport.answerAll()
            try await eventually("request done", timeout: .seconds(60)) { try await store.report(id)?.state == .done }
            #expect(try await store.report(id)?.accepted == 50)
        }
    }
}
