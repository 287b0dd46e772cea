import Foundation
import PushgateCore
import PushgateSQLite
import Testing

@testable import pushgate_bench

/// The soak's cross-check in the gateway's store at the end: which targets of a request are devices
/// invalidated after it was stored without an outcome (skipped by fan-out, by contract), on a real SQLite
/// store, against the skips the ledger reports.
@Suite struct SoakStoreCheckTests {
    private static let start = Date(timeIntervalSince1970: 1_800_000_000)

    private static func token(_ number: Int) throws -> DeviceToken {
        let hex = String(number, radix: 16)
        return try DeviceToken(hex: String(repeating: "0", count: 64 - hex.count) + hex)
    }

    private static func at(_ seconds: Int) -> Date { start.addingTimeInterval(TimeInterval(seconds)) }

    private static func request(_ id: String, at seconds: Int) throws -> NotificationRequest {
        NotificationRequest(
            id: try RequestID(id),
            groups: ["g"],
            payload: try Payload(jsonString: #"{"aps":{"alert":"soak"}}"#),
            createdAt: at(seconds)
        )
    }

    @Test func devicesInvalidatedAfterARequestWasStoredAndWithoutAnOutcomeAreCounted() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("soak-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("soak.db").path
        let store = try SQLiteStore(path: path)
        _ = try await store.register(
            batch: try (1...6).map { Registration(token: try Self.token($0), group: "g", at: Self.at(0)) }
        )
        // Device 6 is invalid before r1 is stored: not one of r1's targets.
        _ = try await store.invalidate(
            app: Registration.defaultApp,
            token: try Self.token(6),
            reason: .unregistered,
            appleTimestamp: Self.at(0),
            at: Self.at(1)
        )
        let r1 = try await store.enqueue(try Self.request("r1", at: 2))
        #expect(r1.targetCount == 5)
        // Devices 2 and 3 are invalidated after r1 was stored, before any page of it was read.
        for number in [2, 3] {
            _ = try await store.invalidate(
                app: Registration.defaultApp,
                token: try Self.token(number),
                reason: .unregistered,
                appleTimestamp: Self.at(0),
                at: Self.at(3)
            )
        }
        let r2 = try await store.enqueue(try Self.request("r2", at: 4))
        #expect(r2.targetCount == 3)
        // Fan-out of both: the ledger reports r1's two skips, which the store's cross-check shows too.
        let owner = InstanceID("soak-check")
        while let chunk = try await store.claimChunk(
            owner: owner,
            now: Self.at(5),
            leaseDuration: .seconds(30),
            chunkSize: 10
        ) {
            let page = try await store.targets(of: chunk, after: chunk.progress, limit: 10)
            let progress = ChunkProgress(
                chunk: chunk,
                through: page.scannedThrough,
                accepted: page.targets.count,
                completesChunk: page.isEnd,
                skipped: page.skipped.count
            )
            _ = try await store.recordProgress(progress, owner: owner, now: Self.at(5), leaseDuration: .seconds(30))
        }
        let reports = [try #require(try await store.report(r1.id)), try #require(try await store.report(r2.id))]
        #expect(reports.map(\.skipped) == [2, 0])
        #expect(reports.allSatisfy { $0.state == .done && $0.targets == $0.accepted + $0.failed + $0.skipped })
        try store.close()

        let skipped = try SoakProbes.skippedInvalidated(databasePath: path, requestIDs: ["r1", "r2", "unknown"])
        #expect(skipped == ["r1": 2])
    }
}
