import Foundation
import PushgateCore
import PushgatePostgres
import Testing

/// Progress is recorded in the background while claims and housekeeping expire requests, on one
/// instance or several. Both lock a request and its chunks; with opposite orders PostgreSQL aborts one of
/// them as a deadlock (SQLSTATE 40P01): the store runs the transaction again, and counts it.
@Suite("PostgreSQL store: one lock order", .enabled(if: TestDatabase.isAvailable, TestDatabase.skipReason))
struct PostgresLockOrderTests {
    static let base: Int64 = 1_800_000_000
    static func at(_ seconds: Int64) -> Date { Date(timeIntervalSince1970: TimeInterval(base + seconds)) }
    static func token(_ number: Int) -> DeviceToken { try! DeviceToken(hex: String(format: "%064x", number)) }

    @Test("progress recorded while its request expires: no deadlock, every target accepted or failed once")
    func progressAndExpiryRaceWithoutDeadlock() async throws {
        try await TestDatabase.withFreshSchema { schema in
            var configuration = try TestDatabase.configuration(schema: schema)
            configuration.maximumConnections = 8
            try await PostgresStore.withStore(configuration: configuration, logger: TestDatabase.quietLogger) { store in
                let devices = 12
                _ = try await store.register(
                    batch: (1...devices).map { Registration(token: Self.token($0), group: "g", at: Self.at(0)) }
                )
                for round in 0..<60 {
                    let id = try await store.enqueue(
                        NotificationRequest(
                            id: try RequestID("race-\(round)"),
                            groups: ["g"],
                            expiration: .at(epochSeconds: Self.base + 10),
                            payload: Payload.alert("x"),
                            createdAt: Self.at(0)
                        )
                    ).id
                    var progresses = [ChunkProgress]()
                    while let chunk = try await store.claimChunk(
                        owner: InstanceID("a"),
                        now: Self.at(1),
                        leaseDuration: .seconds(30),
                        chunkSize: 3
                    ) {
                        let tokens = try await store.targets(of: chunk, after: chunk.progress, limit: 10).targets.map(
                            \.token
                        )
                        progresses.append(
                            ChunkProgress(
                                chunk: chunk,
                                through: chunk.through,
                                accepted: tokens.count - 2,
                                lastAPNsID: "apns-\(round)",
                                retries: [
                                    RetryEntry(
                                        token: tokens[1],
                                        attempt: 1,
                                        nextAttemptAt: Self.at(2),
                                        reason: "TooManyRequests"
                                    )
                                ],
                                failures: [
                                    FailureEntry(
                                        token: tokens[0],
                                        reason: "BadDeviceToken",
                                        status: 400,
                                        at: Self.at(2)
                                    )
                                ],
                                completesChunk: true
                            )
                        )
                    }
                    try #require(progresses.count == devices / 3)
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for progress in progresses {
                            group.addTask {
                                _ = try await store.recordProgress(
                                    progress,
                                    owner: InstanceID("a"),
                                    now: Self.at(2),
                                    leaseDuration: .seconds(30)
                                )
                            }
                        }
                        group.addTask { _ = try await store.expireOverdue(now: Self.at(11)) }
                        group.addTask {
                            _ = try await store.claimRetries(
                                owner: InstanceID("b"),
                                now: Self.at(11),
                                leaseDuration: .seconds(30),
                                limit: 10
                            )
                        }
                        try await group.waitForAll()
                    }
                    _ = try await store.expireOverdue(now: Self.at(12))
                    let report = try #require(try await store.report(id))
                    #expect(report.state == .expired, "round \(round)")
                    #expect(report.accepted + report.failed == devices, "round \(round): \(report)")
                    #expect(report.pendingRetries == 0, "round \(round)")
                }
                #expect(store.deadlocksRetried == 0, "transactions aborted as deadlocks")
            }
        }
    }
}
