import Foundation
import PushgateCore
import PushgateDispatch
import PushgatePostgres
import Synchronization
import Testing

/// Group commit on PostgreSQL while the store's connections are terminated under it: a caller answered
/// "stored" is stored; a caller answered a failure may find its request stored after all (the commit
/// went through and its answer was lost with the connection), which a retry with the same id or
/// idempotency key shows (``StoreError/Code/duplicateRequestID``, or the replay): nothing is stored twice.
@Suite(
    "PostgreSQL: group commit while connections are terminated",
    .serialized,
    .timeLimit(.minutes(10)),
    .enabled(
        if: PostgresTestDatabase.isAvailable,
        "PUSHGATE_TEST_POSTGRES_URL is not set: no PostgreSQL server to test against"
    )
)
struct PostgresGroupCommitTests {
    static func token(_ number: Int) -> String { String(format: "%064x", 0x9C_0000 + number) }

    @Test(
        "connections terminated mid-batch: everyone answered stored is stored, every failed request is stored once when sent again"
    )
    func terminatedMidBatch() async throws {
        let cluster = try ThrowawayCluster()
        defer { cluster.stop() }
        let database = try PostgresTestDatabase(url: cluster.url)
        try await database.register(count: 20, in: "g", token: Self.token)
        try await PostgresStore.withStore(
            configuration: database.configuration,
            logger: PostgresTestDatabase.quietLogger
        ) { store in
            // Only the intake is under test: a submission does not need the dispatch loop to run.
            let dispatcher = Dispatcher(
                store: store,
                routes: [
                    Registration.defaultApp: DeliveryRoute(
                        transport: RecordingAPNsTransport(),
                        topic: try Topic("com.example.groupcommit")
                    )
                ],
                configuration: Dispatcher.Configuration(instanceID: InstanceID("group-commit-pg")),
                logger: TestLogger.make("dispatch")
            )
            let requests = (0..<400).map { number in
                NotificationRequest(
                    id: try! RequestID("pg\(number)"),
                    groups: ["g"],
                    payload: Payload.alert("hi"),
                    createdAt: Date()
                )
            }
            let stop = Atomic<Bool>(false)
            let terminations = Task.detached { () -> Int in
                var terminated = 0
                while !stop.load(ordering: .relaxed) {
                    let count = try? cluster.psql(
                        """
                        SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                        WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
                        """
                    )
                    terminated += Int(count ?? "0") ?? 0
                    // Now and then, so that some batches commit between terminations and others are cut.
                    try? await Task.sleep(for: .milliseconds(400))
                }
                return terminated
            }
            var answers: [Result<EnqueueResult, any Error>] = []
            // Waves of 40 at once, so that batches form while terminations land among them.
            for wave in stride(from: 0, to: requests.count, by: 40) {
                let slice = Array(requests[wave..<(wave + 40)])
                answers += await withTaskGroup(of: (Int, Result<EnqueueResult, any Error>).self) { group in
                    for (index, request) in slice.enumerated() {
                        group.addTask {
                            do { return (index, .success(try await dispatcher.submit(request))) } catch {
                                return (index, .failure(error))
                            }
                        }
                    }
                    var ordered = [Result<EnqueueResult, any Error>?](repeating: nil, count: slice.count)
                    for await (index, answer) in group { ordered[index] = answer }
                    return ordered.map { $0! }
                }
            }
            stop.store(true, ordering: .relaxed)
            let terminated = await terminations.value

            // Reads and resubmissions right after the terminations may meet a connection being replaced.
            func retrying<T>(_ body: () async throws -> T) async throws -> T {
                for _ in 0..<100 {
                    do { return try await body() } catch let error as StoreError where error.code != .backend {
                        throw error
                    } catch {
                        try await Task.sleep(for: .milliseconds(50))
                    }
                }
                return try await body()
            }
            var failed = 0
            var storedAfterAll = 0
            if let firstFailure = answers.first(where: { if case .failure = $0 { true } else { false } }) {
                print("group commit under terminated connections: first failure: \(firstFailure)")
            }
            for (request, answer) in zip(requests, answers) {
                switch answer {
                case .success:
                    let stored = try await retrying { try await store.request(request.id) != nil }
                    #expect(stored, "\(request.id) was answered stored: it is")
                case .failure:
                    failed += 1
                    // Sent again, as the UDP ingress and a client do: it is stored now, or was already.
                    do {
                        _ = try await retrying { try await dispatcher.submit(request) }
                    } catch let error as StoreError where error.code == .duplicateRequestID {
                        storedAfterAll += 1
                    }
                    let stored = try await retrying { try await store.request(request.id) != nil }
                    #expect(stored, "\(request.id) is stored once sent again")
                }
            }
            let count = try cluster.psql(
                "SELECT count(*) FROM \(database.configuration.schema).request WHERE id LIKE 'pg%'"
            )
            #expect(Int(count) == requests.count, "every request stored exactly once")
            print(
                "group commit under terminated connections: \(terminated) connections terminated, "
                    + "\(failed) of \(requests.count) answered a failure, \(storedAfterAll) of those stored after all"
            )
        }
    }
}
