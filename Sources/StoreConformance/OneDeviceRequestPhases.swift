public import Foundation
public import PushgateCore

/// One-device requests driven through a store as the dispatcher drives it, phase by phase, with the SQL
/// of each phase: `batch` devices registered each alone in its group, a batch of requests to them stored
/// by group commit with its claim (and the claims after it, for a store that claims nothing with the
/// enqueue), every chunk's completing record in one batch, then the batch's reports. The statement-count
/// tests of both stores read their bounds off it.
public struct OneDeviceRequestPhases: Sendable {
    /// The statements of each phase, as the store's observer recorded them.
    public var intake: [String]
    public var outcomes: [String]
    public var reading: [String]
    public var requests: [NotificationRequest]
    public var stored: EnqueueBatchResult
    public var claimed: [ClaimedWork]
    public var recorded: [Result<ProgressResult, StoreError>]
    public var reports: [DeliveryReport]

    /// Runs the phases on `store`, whose statements `statements` records.
    public static func run(
        _ store: any PushStore,
        statements: RecordedStatements,
        batch: Int,
        owner: InstanceID,
        start: Date
    ) async throws -> OneDeviceRequestPhases {
        let token = { (number: Int) in try DeviceToken(hex: String(format: "%064x", 0xC0_0000 + number)) }
        _ = try await store.register(
            batch: try (1...batch).map { Registration(token: try token($0), group: "user\($0)", at: start) }
        )
        let requests = try (1...batch).map { index in
            NotificationRequest(
                id: try RequestID("r\(index)"),
                groups: ["user\(index)"],
                payload: Payload.alert("hi"),
                createdAt: start
            )
        }
        _ = statements.take()
        let lease = LeaseWindow(owner: owner, now: start, duration: .seconds(60))
        let claim = BatchClaim(lease: lease, chunkSize: 1_000, pageLimit: 500, maximumChunks: batch)
        let stored = try await store.enqueue(batch: requests, claiming: claim)
        var claimed = stored.claimed
        // A store that claims nothing with the enqueue: the dispatcher's next claim takes the chunks.
        while claimed.count < batch {
            let more = try await store.claimChunks(claim)
            if more.isEmpty { break }
            claimed += more
        }
        let intake = statements.take()
        let records = claimed.map { work in
            ProgressRecord(
                ChunkProgress(
                    chunk: work.chunk,
                    through: work.firstPage.scannedThrough,
                    accepted: work.firstPage.targets.count,
                    lastAPNsID: "apns-\(work.chunk.id)",
                    completesChunk: true
                ),
                renewing: lease
            )
        }
        let recorded = await store.recordProgress(batch: records)
        let outcomes = statements.take()
        let reports = try await store.reports(requests.map(\.id))
        let reading = statements.take()
        return OneDeviceRequestPhases(
            intake: intake,
            outcomes: outcomes,
            reading: reading,
            requests: requests,
            stored: stored,
            claimed: claimed,
            recorded: recorded,
            reports: reports
        )
    }

    /// Statements a request of the phase, over `batch` requests.
    public static func perRequest(_ phase: [String], batch: Int) -> Double { Double(phase.count) / Double(batch) }
}
