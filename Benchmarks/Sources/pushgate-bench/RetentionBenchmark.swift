import ArgumentParser
import Foundation
import PushgateCore
import PushgateSQLite

/// `pushgate-bench retention`: the disk a request costs in an SQLite ledger, before and after retention.
/// The store's real code on a real file: `--requests` one-device requests (as the UDP and HTTP traffic
/// that is most requests), each stored and delivered the way the dispatcher does it (one device in twenty
/// failing, so with a failure row), then one retention pass (``LedgerPruner``) a retention period later,
/// then the same requests again, to see the freed pages reused rather than the file grown.
struct RetentionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "retention",
        abstract: "Bytes of disk per request in the SQLite ledger, before and after a retention pass.",
        discussion: """
            Prints the pages in use (page_count - freelist_count, in bytes) and the file's size after \
            storing --requests one-device requests, after a retention pass, and after storing as many again; \
            and the retention pass's transactions, the longest of them, and their mean.
            """
    )

    @Option(help: "One-device requests stored per round.")
    var requests: Int = 10_000

    @Option(help: "Devices registered first (the requests go to them in turn).")
    var devices: Int = 1_000

    @Option(help: "Folder for the database file (default: a new temporary folder, removed afterwards).")
    var folder: String?

    @Flag(help: "Commit without fsync (synchronous = NORMAL), as a disk-bound machine would need for a quick run.")
    var noSync = false

    func validate() throws {
        guard requests > 0, devices > 0 else { throw ValidationError("--requests and --devices must be positive") }
    }

    func run() async throws {
        let base = folder.map { URL(fileURLWithPath: $0) } ?? FileManager.default.temporaryDirectory
        let directory = base.appendingPathComponent("pushgate-retention-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = SQLiteStore.Configuration()
        if noSync { configuration.synchronous = .normal }
        let store = try SQLiteStore(
            path: directory.appendingPathComponent("pushgate.db").path,
            configuration: configuration
        )
        defer { try? store.close() }
        let clock = ManualWallClock()
        let tokens = (1...devices).map { number in
            let hex = String(number, radix: 16)
            return try! DeviceToken(hex: String(repeating: "0", count: 64 - hex.count) + hex)
        }
        _ = try await store.register(
            batch: tokens.map { Registration(app: Registration.defaultApp, token: $0, group: "all", at: clock.now()) }
        )
        let registry = try await store.pageUse()
        print("registry of \(devices) devices: \(registry.usedBytes) bytes in use, file \(registry.fileBytes) bytes")

        let clockStart = ContinuousClock.now
        try await storeRound(store: store, clock: clock, tokens: tokens, round: 1)
        let stored = try await store.pageUse()
        let perRequest = Double(stored.usedBytes - registry.usedBytes) / Double(requests)
        print(
            "after \(requests) requests: \(stored.usedBytes) bytes in use, file \(stored.fileBytes) bytes: "
                + "\(String(format: "%.0f", perRequest)) bytes a request (took \(ContinuousClock.now - clockStart))"
        )

        let retention = LedgerRetention.Configuration.defaultRetention
        clock.advance(by: TimeInterval(retention.components.seconds) + 1)
        let pruner = LedgerPruner(store: store, configuration: .init(retention: retention))
        let passStart = ContinuousClock.now
        let pass = try await pruner.prune(now: clock.now())
        let passTook = ContinuousClock.now - passStart
        let pruned = try await store.pageUse()
        let left = Double(pruned.usedBytes - registry.usedBytes) / Double(requests)
        print(
            "after retention: \(pruned.usedBytes) bytes in use (\(String(format: "%.1f", left)) bytes a request "
                + "left), file \(pruned.fileBytes) bytes, \(pruned.freePages) free pages"
        )
        print(
            "retention pass: \(pass.summary.requests) requests, \(pass.summary.rows) rows, "
                + "\(pass.summary.transactions) transactions in \(passTook); longest transaction "
                + "\(pass.longestTransaction), mean \(pass.transactionTime / max(1, pass.summary.transactions))"
        )

        try await storeRound(store: store, clock: clock, tokens: tokens, round: 2)
        let again = try await store.pageUse()
        print(
            "after \(requests) more requests: \(again.usedBytes) bytes in use, file \(again.fileBytes) bytes "
                + "(grew \(again.fileBytes - pruned.fileBytes) bytes: freed pages reused)"
        )
    }

    /// Stores and delivers `requests` one-device requests, one second apart.
    private func storeRound(store: SQLiteStore, clock: ManualWallClock, tokens: [DeviceToken], round: Int) async throws
    {
        let owner = InstanceID("bench")
        for index in 0..<requests {
            clock.advance(by: 1)
            let token = tokens[index % tokens.count]
            let request = NotificationRequest(
                id: try RequestID("r\(round)-\(index)"),
                app: Registration.defaultApp,
                groups: [],
                devices: [token],
                pushType: .alert,
                priority: .immediate,
                expiration: .storagePolicy,
                payload: Payload.alert("Your order \(index) has shipped"),
                createdAt: clock.now()
            )
            let lease = LeaseWindow(owner: owner, now: clock.now(), duration: .seconds(30))
            let (_, claimed) = try await store.enqueue(request, claiming: lease, chunkSize: 1_000, pageLimit: 1_000)
            guard let claimed else { throw ValidationError("request \(index) was not claimed with its enqueue") }
            var progress = ChunkProgress(
                chunk: claimed.chunk,
                through: claimed.firstPage.scannedThrough,
                completesChunk: claimed.firstPage.isEnd
            )
            for target in claimed.firstPage.targets {
                if index % 20 == 0 {
                    progress.failures.append(
                        FailureEntry(token: target.token, reason: "BadDeviceToken", status: 400, at: clock.now())
                    )
                } else {
                    progress.accepted += 1
                    progress.lastAPNsID = UUID().uuidString.lowercased()
                }
            }
            _ = try await store.recordProgress(progress, renewing: lease)
        }
    }
}
