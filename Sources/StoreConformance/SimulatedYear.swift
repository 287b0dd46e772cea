import Foundation
public import PushgateCore

/// A year of steady traffic on a store, on a manual clock, with retention on: each simulated day a mix of
/// one-device requests and group requests is stored, delivered (some devices fail, a few requests carry
/// an idempotency key) and finished, and a retention pass runs every ``passesPerDay``-th of a day. After
/// each day the caller's `measure` reads the store's size (SQLite: pages in use; PostgreSQL: the tables'
/// bytes), so that a test can check the size is flat once the first retention period is over.
///
/// One driver for both stores, so that both run the same year.
public struct SimulatedYear: Sendable {
    public var days = 365
    public var oneDeviceRequestsPerDay = 32
    public var groupRequestsPerDay = 8
    public var devices = 200
    public var groupSize = 20
    public var passesPerDay = 4
    public var retention: Duration = .seconds(7 * 24 * 60 * 60)

    public init() {}

    /// What the year did, and the size measured after each day.
    public struct Result: Sendable {
        public var sizes: [Int64] = []
        public var requests = 0
        public var pruned = LedgerRetention.Summary()
        /// The longest write transaction of every retention pass.
        public var longestTransaction = Duration.zero
        /// Every retention transaction together.
        public var transactionTime = Duration.zero
        /// The mean retention transaction.
        public var meanTransaction: Duration { transactionTime / max(1, pruned.transactions) }
        /// The longest full pass.
        public var longestPass = Duration.zero

        /// The sizes from the day after the first retention period (plus one day of cadence) on.
        public func steadySizes(retentionDays: Int) -> ArraySlice<Int64> {
            sizes.dropFirst(retentionDays + 2)
        }
    }

    static let day: TimeInterval = 24 * 60 * 60

    public func run(
        store: any PushStore,
        clock: ManualWallClock,
        measure: @Sendable () async throws -> Int64
    ) async throws -> Result {
        guard let pruning = store as? any LedgerPruning else {
            throw ConformanceFailure(file: #fileID, line: #line, message: "the store does not implement LedgerPruning")
        }
        let pruner = LedgerPruner(store: pruning, configuration: .init(retention: retention))
        let groups = max(1, devices / groupSize)
        _ = try await store.register(
            batch: (0..<devices).map { number in
                Registration(
                    app: Fixture.app,
                    token: Fixture.token(number + 1),
                    group: "group-\(number % groups)",
                    at: clock.now()
                )
            }
        )
        var result = Result()
        let perDay = oneDeviceRequestsPerDay + groupRequestsPerDay
        let step = Self.day / Double(perDay)
        let passEvery = max(1, perDay / passesPerDay)
        let timer = ContinuousClock()
        var serial = 0
        for dayNumber in 0..<days {
            for index in 0..<perDay {
                serial += 1
                clock.advance(by: step)
                // Group requests spread through the day: one in every perDay / groupRequestsPerDay.
                let isGroup = groupRequestsPerDay > 0 && index % (perDay / groupRequestsPerDay) == 0
                var request = NotificationRequest(
                    id: try RequestID("y\(dayNumber)-\(index)"),
                    app: Fixture.app,
                    groups: isGroup ? ["group-\(serial % groups)"] : [],
                    devices: isGroup ? [] : [Fixture.token(serial % devices + 1)],
                    pushType: .alert,
                    priority: .immediate,
                    expiration: .storagePolicy,
                    payload: try Self.payload(serial),
                    createdAt: clock.now()
                )
                if serial % 10 == 0 {
                    request.idempotency = Idempotency(
                        key: try IdempotencyKey("order-\(serial)"),
                        requestBytes: Array("request \(serial)".utf8)
                    )
                }
                try await deliver(request, store: store, now: clock.now(), serial: serial)
                result.requests += 1
                if (index + 1) % passEvery == 0 {
                    var pass: LedgerPruner.Pass?
                    let took = try await timer.measure { pass = try await pruner.prune(now: clock.now()) }
                    result.longestPass = max(result.longestPass, took)
                    if let pass {
                        result.pruned.requests += pass.summary.requests
                        result.pruned.rows += pass.summary.rows
                        result.pruned.transactions += pass.summary.transactions
                        result.pruned.scanned += pass.summary.scanned
                        result.longestTransaction = max(result.longestTransaction, pass.longestTransaction)
                        result.transactionTime += pass.transactionTime
                    }
                }
            }
            result.sizes.append(try await measure())
        }
        return result
    }

    /// A payload the size of a real one (about 200 bytes: an alert with a title and a body, a badge, a
    /// sound and an app field), so that the ledger's rows weigh what they weigh in production.
    static func payload(_ serial: Int) throws -> Payload {
        let json = """
            {"aps": {"alert": {"title": "Your order has shipped", "body": "Order \(serial) is on its way and \
            should arrive within two days."}, "badge": \(serial % 9 + 1), "sound": "default"}, \
            "order": "A-\(100_000 + serial)", "kind": "shipping"}
            """
        return try Payload(jsonBytes: Array(json.utf8))
    }

    /// Stores the request and delivers it at once: one device in twenty fails for good (a failure row).
    private func deliver(_ request: NotificationRequest, store: any PushStore, now: Date, serial: Int) async throws {
        let lease = LeaseWindow(owner: Fixture.instanceA, now: now, duration: Fixture.lease)
        let (_, claimed) = try await store.enqueue(request, claiming: lease, chunkSize: 1_000, pageLimit: 1_000)
        let answer: (DeviceToken) -> Fixture.Answer = { token in
            (Int(token.hex.suffix(4), radix: 16)! + serial) % 20 == 0 ? .reject("BadDeviceToken", status: 400) : .accept
        }
        guard let claimed, claimed.firstPage.isEnd else {
            try await Fixture.deliverAll(store, now: now, chunkSize: 1_000, pageSize: 1_000, answer: answer)
            return
        }
        var progress = ChunkProgress(
            chunk: claimed.chunk,
            through: claimed.firstPage.scannedThrough,
            completesChunk: true,
            skipped: claimed.firstPage.skipped.count
        )
        for target in claimed.firstPage.targets {
            switch answer(target.token) {
            case .accept:
                progress.accepted += 1
                progress.lastAPNsID = "00000000-0000-4000-8000-\(target.token.hex.suffix(12))"
            case .reject(let reason, let status):
                progress.failures.append(FailureEntry(token: target.token, reason: reason, status: status, at: now))
            case .retry:
                break
            }
        }
        let recorded = try await store.recordProgress(progress, renewing: lease)
        try expectEqual(recorded, .chunkCompleted, "the request's only chunk completes")
    }
}
