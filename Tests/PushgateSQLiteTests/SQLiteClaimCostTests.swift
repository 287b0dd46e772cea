import Foundation
import PushgateCore
import PushgateSQLite
import Testing

/// What a chunk claim costs, printed, not judged (a figure for comparing claim queries, not a timed
/// test): off unless `PUSHGATE_CLAIM_COST=1`.
@Suite(
    "SQLite store: claim cost (figures)",
    .enabled(if: ProcessInfo.processInfo.environment["PUSHGATE_CLAIM_COST"] == "1")
)
struct SQLiteClaimCostTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    static func token(_ number: Int) -> DeviceToken {
        try! DeviceToken(hex: String(format: "%064x", 0xC1_0000 + number))
    }

    /// Claims every chunk of what was enqueued, timing the claims alone; prints microseconds per claim.
    static func claimAll(_ store: SQLiteStore, _ label: String, chunkSize: Int) async throws {
        let clock = ContinuousClock()
        var claims = 0
        let elapsed = try await clock.measure {
            while try await store.claimChunk(
                owner: InstanceID("cost"),
                now: start.addingTimeInterval(10),
                leaseDuration: .seconds(600),
                chunkSize: chunkSize
            ) != nil {
                claims += 1
            }
        }
        let micros = Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6
        print("claim cost \(label): \(claims) claims, \(Int(micros / Double(max(claims, 1)))) µs per claim")
    }

    @Test("one broadcast of 50,000 devices in chunks of 100; then the same beside 20 small requests")
    func claimCost() async throws {
        try await withTemporaryStore { store in
            _ = try await store.register(
                batch: (1...50_000).map { Registration(token: Self.token($0), group: "all", at: Self.start) }
            )
            func request(_ name: String, groups: [String] = [], devices: [DeviceToken] = []) -> NotificationRequest {
                NotificationRequest(
                    id: try! RequestID(name),
                    groups: groups,
                    devices: devices,
                    payload: try! Payload(jsonString: #"{"aps":{"alert":"hi"}}"#),
                    createdAt: Self.start
                )
            }
            _ = try await store.enqueue(request("alone", groups: ["all"]))
            try await Self.claimAll(store, "a broadcast alone", chunkSize: 100)
            _ = try await store.enqueue(request("beside", groups: ["all"]))
            for index in 0..<20 { _ = try await store.enqueue(request("small-\(index)", devices: [Self.token(index)])) }
            try await Self.claimAll(store, "a broadcast beside 20 one-device requests", chunkSize: 100)
        }
    }
}
