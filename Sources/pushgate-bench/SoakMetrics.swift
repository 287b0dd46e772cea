import Foundation

/// One reading of the gateway (and the simulator's memory) during a soak.
struct SoakSample: Sendable {
    var elapsed: Double
    var rssBytes: Int?
    var fileDescriptors: Int?
    var threads: Int?
    /// Gateway CPU over the interval since the previous sample, as a share of one core.
    var cpuShare: Double?
    var simulatorRSSBytes: Int?
    /// The simulator's CPU over the same interval: near a core (or its threads), it is the bottleneck.
    var simulatorCPUShare: Double?
    var databaseBytes: Int?
    /// SQLite's heap in the gateway (``SQLiteHeapReader``): its page caches, bounded by `cache_size` per
    /// connection, fill as the store grows.
    var sqliteHeapBytes: Int?

    /// RSS less SQLite's heap: what is not SQLite's caches.
    var rssLessSQLiteBytes: Int? {
        guard let rssBytes, let sqliteHeapBytes else { return nil }
        return rssBytes - sqliteHeapBytes
    }
}

/// Takes samples of a process from `/proc`; the CPU share is over the time since the previous one.
final class SoakSampler {
    private let pid: Int32
    private let simulatorPID: Int32?
    private let databasePath: String
    private let start: ContinuousClock.Instant
    private let sqliteHeap: SQLiteHeapReader?
    private var previous: (at: ContinuousClock.Instant, cpu: CPUTime, simulator: CPUTime?)?
    private(set) var samples: [SoakSample] = []

    init(pid: Int32, simulatorPID: Int32?, databasePath: String, start: ContinuousClock.Instant) {
        self.pid = pid
        self.simulatorPID = simulatorPID
        self.databasePath = databasePath
        self.start = start
        self.sqliteHeap = SQLiteHeapReader(pid: pid)
    }

    /// Whether SQLite's heap is read (gdb found the counters).
    var readsSQLiteHeap: Bool { sqliteHeap != nil }

    func sample() -> SoakSample {
        let now = ContinuousClock.now
        let cpu = ProcessMetrics.processCPU(pid: pid)
        var share: Double? = nil
        if let cpu, let previous, now > previous.at {
            share = (cpu - previous.cpu).total / (now - previous.at).seconds
        }
        let simulatorCPU = simulatorPID.flatMap(ProcessMetrics.processCPU)
        var simulatorShare: Double? = nil
        if let simulatorCPU, let previous, let before = previous.simulator, now > previous.at {
            simulatorShare = (simulatorCPU - before).total / (now - previous.at).seconds
        }
        if let cpu { previous = (now, cpu, simulatorCPU) }
        let files = FileManager.default
        let databaseBytes = ["", "-wal"].reduce(0) { sum, suffix in
            sum + ((try? files.attributesOfItem(atPath: databasePath + suffix)[.size] as? Int) ?? 0)
        }
        let sample = SoakSample(
            elapsed: (now - start).seconds,
            rssBytes: ProcessMetrics.currentRSS(pid: String(pid)),
            fileDescriptors: ProcessMetrics.entries(pid: pid, directory: "fd"),
            threads: ProcessMetrics.entries(pid: pid, directory: "task"),
            cpuShare: share,
            simulatorRSSBytes: simulatorPID.flatMap { ProcessMetrics.currentRSS(pid: String($0)) },
            simulatorCPUShare: simulatorShare,
            databaseBytes: databaseBytes,
            sqliteHeapBytes: sqliteHeap?.read()?.memoryUsed
        )
        samples.append(sample)
        return sample
    }
}

/// A metric's verdict over the samples after the warm-up: every value within `tolerance` of the
/// first post-warm-up value (the reference).
struct SoakMetricVerdict: Sendable {
    var name: String
    var reference: Double
    var last: Double
    var minimum: Double
    var maximum: Double
    var samples: Int
    var tolerance: Double

    /// The largest relative distance of a sample from the reference.
    var drift: Double {
        guard reference != 0 else { return maximum == 0 && minimum == 0 ? 0 : .infinity }
        return max(abs(maximum - reference), abs(minimum - reference)) / abs(reference)
    }

    var passed: Bool { drift <= tolerance }

    /// nil when no sample after the warm-up has the metric. With `window` > 1 the values judged are
    /// the means of consecutive runs of `window` samples (a rate such as CPU is noisy per sample).
    static func judge(
        _ name: String,
        samples: [SoakSample],
        warmup: Double,
        tolerance: Double,
        window: Int = 1,
        value: (SoakSample) -> Double?
    ) -> SoakMetricVerdict? {
        let values = windowMeans(samples.filter { $0.elapsed >= warmup }.compactMap(value), window: window)
        guard let reference = values.first, let last = values.last else { return nil }
        return SoakMetricVerdict(
            name: name,
            reference: reference,
            last: last,
            minimum: values.min() ?? reference,
            maximum: values.max() ?? reference,
            samples: values.count,
            tolerance: tolerance
        )
    }

    /// Means of consecutive, non-overlapping runs of `window` values; a shorter last run counts
    /// only when it is the only one.
    static func windowMeans(_ values: [Double], window: Int) -> [Double] {
        guard window > 1, values.count >= window else { return values }
        return stride(from: 0, through: values.count - window, by: window).map { start in
            values[start..<(start + window)].reduce(0, +) / Double(window)
        }
    }
}
