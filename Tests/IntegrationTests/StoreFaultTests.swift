import APNsTransport
import Foundation
import Prometheus
import PushTransport
import PushgateCore
import PushgateDispatch
import PushgatePostgres
import PushgateSQLite
import Synchronization
import Testing

/// A transport that answers every request at once (from another task): 503 to the first attempt of
/// every tenth device, 200 otherwise; it counts the sends per device.
final class CountingTransport: APNsNotificationTransport {
    private let sends = Mutex<[DeviceToken: Int]>([:])
    private let accepted = Mutex<Set<DeviceToken>>([])

    var inFlightCapacity: Int { 64 }

    func submit(_ requests: [APNsRequest]) -> [UInt64] {
        let answers = sends.withLock { sends in
            requests.map { request -> (APNsRequest, Int) in
                sends[request.deviceToken, default: 0] += 1
                let refused = Self.refusedOnce(request.deviceToken) && sends[request.deviceToken] == 1
                return (request, refused ? 503 : 200)
            }
        }
        Task {
            for (request, status) in answers {
                if status == 200 { _ = accepted.withLock { $0.insert(request.deviceToken) } }
                request.receiver.receive(
                    .answered(
                        status: status,
                        reason: nil,
                        apnsID: nil,
                        apnsUniqueID: nil,
                        invalidatedAtMilliseconds: nil
                    ),
                    for: request
                )
            }
        }
        return requests.indices.map { UInt64($0) }
    }

    func withdraw(_ ids: some Sequence<UInt64>) -> Int { 0 }

    static func refusedOnce(_ token: DeviceToken) -> Bool { token.hex.hasSuffix("0") }

    var acceptedCount: Int { accepted.withLock { $0.count } }

    /// Sends beyond what each device needed (one, or two for a device refused once).
    var duplicates: Int {
        sends.withLock { sends in
            sends.reduce(0) { total, entry in total + max(0, entry.value - (Self.refusedOnce(entry.key) ? 2 : 1)) }
        }
    }
}

/// Set once the dispatcher's `run` returned.
final class EndFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    func set() { flag.store(true, ordering: .relaxed) }
    var isSet: Bool { flag.load(ordering: .relaxed) }
}

@Suite("Dispatcher: a store error never ends it", .timeLimit(.minutes(10)))
struct StoreFaultTests {
    static let devices = 200
    static let maximumInFlight = 64

    static func token(_ number: Int) -> DeviceToken {
        try! DeviceToken(hex: String(format: "%064x", 0xfa_0000 + number))
    }

    struct Run {
        var calls: [StoreOperation: Int]
        var injected: Bool
    }

    enum Kind: CaseIterable {
        case sqlite, postgres
    }

    static var kinds: [Kind] { PostgresTestDatabase.isAvailable ? [.sqlite, .postgres] : [.sqlite] }

    static func configuration() -> Dispatcher.Configuration {
        var configuration = Dispatcher.Configuration(instanceID: InstanceID("faults"))
        configuration.chunkSize = 50
        configuration.pageSize = 25
        configuration.progressBatch = 25
        configuration.maximumInFlight = maximumInFlight
        configuration.idleInterval = .milliseconds(10)
        configuration.progressInterval = .milliseconds(5)
        configuration.storeBackoff = StoreBackoff(initial: .milliseconds(2), limit: .milliseconds(20))
        configuration.retryPolicy = RetryPolicy(
            backoff: Backoff(base: .milliseconds(5), multiplier: 2, cap: .milliseconds(20))
        )
        return configuration
    }

    /// A fresh store of `kind` with the devices in group `all`, wrapped to inject `fault`.
    static func withStore<R: Sendable>(
        _ kind: Kind,
        fault: FaultInjectingStore.Fault?,
        _ body: @Sendable (FaultInjectingStore) async throws -> R
    ) async throws -> R {
        let registrations = (1...devices).map { Registration(token: token($0), group: "all", at: Date()) }
        switch kind {
        case .sqlite:
            let directory = try TemporaryDirectory()
            let store = try SQLiteStore(path: directory.path("faults.db"))
            defer { try? store.close() }
            _ = try await store.register(batch: registrations)
            return try await body(FaultInjectingStore(base: store, fault: fault))
        case .postgres:
            let database = try PostgresTestDatabase()
            defer { database.drop() }
            return try await PostgresStore.withStore(
                configuration: database.configuration,
                logger: PostgresTestDatabase.quietLogger
            ) {
                store in
                _ = try await store.register(batch: registrations)
                return try await body(FaultInjectingStore(base: store, fault: fault))
            }
        }
    }

    /// One broadcast to every device with `fault` injected; checks that the dispatcher keeps running,
    /// reaches every device and sends at most the in-flight bound twice.
    static func broadcast(_ kind: Kind, fault: FaultInjectingStore.Fault?) async throws -> Run {
        try await withStore(kind, fault: fault) { store in
            let transport = CountingTransport()
            let dispatcher = Dispatcher(
                store: store,
                routes: [
                    Registration.defaultApp: DeliveryRoute(transport: transport, topic: try Topic("com.example.faults"))
                ],
                configuration: configuration(),
                logger: TestLogger.make("dispatch")
            )
            let ended = EndFlag()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    defer { ended.set() }
                    try await dispatcher.run()
                }
                // The dispatcher idles once on the empty store before the request arrives, so every run asks
                // for its next wake-up (a request that finished before the first idle turn never did).
                try await eventually("the dispatcher idles on the empty store", timeout: .seconds(60)) {
                    (store.calls[.nextWakeUp] ?? 0) > 0
                }
                let id = try RequestID("faults")
                // Stored as another instance would store it: the dispatcher reads the request back.
                _ = try await store.enqueue(
                    NotificationRequest(
                        id: id,
                        groups: ["all"],
                        payload: Payload(jsonString: #"{"aps":{"alert":"hi"}}"#),
                        createdAt: Date()
                    )
                )
                dispatcher.wakeUp()
                try await eventually("every device reached and the request done", timeout: .seconds(60)) {
                    try await store.report(id)?.state == .done && transport.acceptedCount == devices
                }
                #expect(!ended.isSet, "the dispatcher must keep running")
                let report = try #require(try await store.report(id))
                #expect(report.accepted >= devices, "\(String(describing: fault))")
                #expect(transport.duplicates <= maximumInFlight, "\(String(describing: fault))")
                group.cancelAll()
            }
            return Run(calls: store.calls, injected: store.injected)
        }
    }

    @Test(
        "each store call fails once in turn: still running, all reached, duplicates within the in-flight bound",
        arguments: [
            StoreOperation.releaseLeases, .claimChunk, .readRequest, .readTargets, .recordProgress, .claimRetries,
            .recordRetryOutcomes, .expireOverdue, .nextWakeUp,
        ]
    )
    func everyCallFailsOnce(operation: StoreOperation) async throws {
        for kind in Self.kinds {
            let clean = try await Self.broadcast(kind, fault: nil)
            let total = clean.calls[operation] ?? 0
            #expect(total > 0, "the scenario calls \(operation.rawValue)")
            for call in 1...max(1, total) {
                let run = try await Self.broadcast(kind, fault: .init(operation: operation, call: call))
                if call == 1 { #expect(run.injected) }
            }
        }
    }

    @Test(
        "while the store fails: not ready, and the metrics say so; it recovers when the store answers"
    )
    func readinessAndMetrics() async throws {
        try await Self.withStore(.sqlite, fault: nil) { store in
            let registry = PrometheusCollectorRegistry()
            let transport = CountingTransport()
            let dispatcher = Dispatcher(
                store: store,
                routes: [
                    Registration.defaultApp: DeliveryRoute(transport: transport, topic: try Topic("com.example.faults"))
                ],
                configuration: Self.configuration(),
                logger: TestLogger.make("dispatch"),
                metrics: DispatchMetrics(factory: PrometheusMetricsFactory(registry: registry))
            )
            let exposition = { String(decoding: registry.emitToBuffer(), as: UTF8.self) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await dispatcher.run() }
                store.setDown(Set(StoreOperation.allCases))
                let id = try RequestID("outage")
                _ = try await dispatcher.submit(
                    NotificationRequest(
                        id: id,
                        groups: ["all"],
                        payload: Payload(jsonString: #"{"aps":{}}"#),
                        createdAt: Date()
                    )
                )
                try await eventually("not ready during the outage") { !dispatcher.isStoreHealthy }
                #expect(exposition().contains("pushgate_store_healthy 0"))
                #expect(exposition().contains(#"pushgate_store_failures_total{operation="claim_chunk"}"#))
                #expect(transport.acceptedCount == 0)
                store.setDown([])
                try await eventually("delivered once the store answers") { try await store.report(id)?.state == .done }
                try await eventually("ready again") { dispatcher.isStoreHealthy }
                #expect(exposition().contains("pushgate_store_healthy 1"))
                #expect(transport.acceptedCount == Self.devices)
                group.cancelAll()
            }
        }
    }

    @Test("the back-off doubles per failure up to its limit and ends with a success")
    func backoff() {
        var backoff = StoreBackoff(initial: .milliseconds(100), limit: .milliseconds(350))
        let start = Date(timeIntervalSince1970: 1_000)
        #expect(backoff.isHealthy && backoff.mayTry(at: start))
        let expected: [TimeInterval] = [0.1, 0.2, 0.35, 0.35]
        for delay in expected {
            backoff.failed(at: start)
            #expect(!backoff.isHealthy)
            #expect(backoff.retryAt == start.addingTimeInterval(delay))
            #expect(!backoff.mayTry(at: start.addingTimeInterval(delay - 0.001)))
            #expect(backoff.mayTry(at: start.addingTimeInterval(delay)))
        }
        backoff.succeeded()
        #expect(backoff.isHealthy && backoff.retryAt == nil)
    }
}
