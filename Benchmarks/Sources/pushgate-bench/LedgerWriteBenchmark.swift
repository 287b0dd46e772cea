import ArgumentParser
import Foundation
import PushgateCore
import PushgateSQLite

/// `pushgate-bench ledger-write`: the SQLite writer's cost per one-device request, by group-commit size,
/// without sockets. Each write is what the dispatcher's group commit hands the store under a steady
/// stream: a batch of new one-device requests (each to its own group, claimed with the enqueue) and the
/// progress records completing the previous batch's chunks, in one transaction (``SQLiteStore/write(_:)``).
/// The writer is the serial part of the one-device path, so its CPU per request bounds the rate a
/// gateway can store, whatever the rest costs.
struct LedgerWriteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger-write",
        abstract: "SQLite writer CPU and wall time per one-device request, by group-commit size.",
        discussion: """
            For each --batches size, on a fresh copy of a database holding --devices devices each in its own \
            group: writes for --seconds, each write storing that many one-device requests (claimed with the \
            enqueue) and completing the previous write's chunks. Prints requests a second, wall and CPU of the \
            process per request (the writer thread is the only busy one), and per write. Commits are fsync'd \
            as the gateway's are (synchronous = FULL) unless --no-sync.
            """
    )

    @Option(help: "Devices, each in its own group (the requests go to them in turn).")
    var devices: Int = 20_000

    @Option(help: "Group-commit sizes to measure, comma-separated.")
    var batches: String = "1,16,64,256"

    @Option(help: "Seconds of writes per size (after one second of warm-up).")
    var seconds: Double = 5

    @Option(help: "Folder for the database files (default: a new temporary folder, removed afterwards).")
    var folder: String?

    @Flag(help: "Commit without fsync (synchronous = NORMAL): the CPU alone.")
    var noSync = false

    @Flag(help: "Also count the statements run, by their first words, and print them per write.")
    var statements = false

    func batchSizes() throws -> [Int] {
        let sizes = batches.split(separator: ",", omittingEmptySubsequences: false).map {
            Int($0.trimmingCharacters(in: .whitespaces))
        }
        guard !sizes.isEmpty, sizes.allSatisfy({ ($0 ?? 0) > 0 }) else {
            throw ValidationError("--batches takes positive sizes, comma-separated (as 1,16,64)")
        }
        return sizes.map { $0! }
    }

    func validate() throws {
        guard devices > 0, seconds > 0 else { throw ValidationError("--devices and --seconds must be positive") }
        _ = try batchSizes()
    }

    func run() async throws {
        let base = folder.map { URL(fileURLWithPath: $0) } ?? FileManager.default.temporaryDirectory
        let directory = base.appendingPathComponent("pushgate-ledger-write-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let template = directory.appendingPathComponent("template.db").path
        let groups = try (0..<devices).map { (group: "user\($0)", tokens: [try BenchDevices.token($0)]) }
        let fill = try await StoreFill.fill(path: template, groups: groups)
        print("registry: \(fill.created) devices, each in its own group, in \(Format.seconds(fill.seconds)) s")
        print("batch  requests/s  wall µs/request  CPU µs/request  CPU ms/write  writes")
        for size in try batchSizes() {
            let path = directory.appendingPathComponent("batch-\(size).db").path
            try StoreFill.copy(template, to: path)
            let result = try await measure(path: path, batch: size)
            print(
                String(
                    format: "%5d  %10.0f  %15.1f  %14.1f  %12.2f  %6d",
                    size,
                    Double(result.requests) / result.wall,
                    result.wall * 1e6 / Double(result.requests),
                    result.cpu * 1e6 / Double(result.requests),
                    result.cpu * 1e3 / Double(result.writes),
                    result.writes
                )
            )
        }
    }

    struct Measured {
        var requests = 0
        var writes = 0
        var wall = 0.0
        var cpu = 0.0
    }

    /// Warms up for a second, then writes for `seconds`.
    private func measure(path: String, batch: Int) async throws -> Measured {
        var configuration = SQLiteStore.Configuration()
        if noSync { configuration.synchronous = .normal }
        let counts = StatementCounts()
        if statements { configuration.statementObserver = { counts.count($0) } }
        let store = try SQLiteStore(path: path, configuration: configuration)
        defer { try? store.close() }
        var stream = OneDeviceStream(store: store, devices: devices, batch: batch)
        _ = try await stream.write(for: 1)
        counts.reset()
        let measured = try await stream.write(for: seconds)
        if statements { counts.print(perWrites: measured.writes) }
        return measured
    }

    /// Statements run, keyed by their SQL with whitespace collapsed and cut at 90 characters.
    final class StatementCounts: @unchecked Sendable {
        private let lock = NSLock()
        private var counts: [String: Int] = [:]

        func count(_ sql: String) {
            let key = String(sql.split(whereSeparator: \.isWhitespace).joined(separator: " ").prefix(90))
            lock.withLock { counts[key, default: 0] += 1 }
        }

        func reset() { lock.withLock { counts = [:] } }

        func print(perWrites writes: Int) {
            let sorted = lock.withLock { counts.sorted { $0.value > $1.value } }
            let total = sorted.reduce(0) { $0 + $1.value }
            Swift.print(String(format: "  statements per write: %.1f", Double(total) / Double(max(1, writes))))
            for (sql, n) in sorted {
                Swift.print(String(format: "  %8.2f  %@", Double(n) / Double(max(1, writes)), sql))
            }
        }
    }

    /// Writes of `batch` new requests and the previous write's completions, as the group commit makes them.
    struct OneDeviceStream {
        let store: SQLiteStore
        let devices: Int
        let batch: Int
        let owner = InstanceID("bench")
        var next = 0
        var previous: [ClaimedWork] = []

        init(store: SQLiteStore, devices: Int, batch: Int) {
            self.store = store
            self.devices = devices
            self.batch = batch
        }

        mutating func write(for seconds: Double) async throws -> Measured {
            let clock = ContinuousClock()
            let start = clock.now
            let cpuStart = ProcessMetrics.selfCPU()
            var measured = Measured()
            while (clock.now - start).seconds < seconds {
                let now = Date()
                let lease = LeaseWindow(owner: owner, now: now, duration: .seconds(60))
                let requests = try (0..<batch).map { offset in
                    let index = next + offset
                    return NotificationRequest(
                        id: try RequestID("r\(index)"),
                        groups: ["user\(index % devices)"],
                        payload: Payload.alert("Your order \(index) has shipped"),
                        createdAt: now
                    )
                }
                next += batch
                let records = previous.map { work in
                    ProgressRecord(
                        ChunkProgress(
                            chunk: work.chunk,
                            through: work.firstPage.scannedThrough,
                            accepted: work.firstPage.targets.count,
                            lastAPNsID: UUID().uuidString.lowercased(),
                            completesChunk: work.firstPage.isEnd
                        ),
                        renewing: lease
                    )
                }
                let claim = BatchClaim(lease: lease, chunkSize: 1_000, pageLimit: 500, maximumChunks: batch)
                let result = await store.write(LedgerWrite(requests: requests, claiming: claim, records: records))
                let stored = try result.enqueued.get()
                for answer in stored.results { _ = try answer.get() }
                for recorded in result.recorded { _ = try recorded.get() }
                guard stored.claimed.count == batch else {
                    throw BenchError("a write claimed \(stored.claimed.count) of its \(batch) requests' chunks")
                }
                previous = stored.claimed
                measured.requests += batch
                measured.writes += 1
            }
            measured.wall = (clock.now - start).seconds
            measured.cpu = (ProcessMetrics.selfCPU() - cpuStart).total
            return measured
        }
    }
}
