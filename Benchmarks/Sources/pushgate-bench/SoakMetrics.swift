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

/// How the samples of one window are summed up into the value judged.
enum SoakWindowStatistic: Sendable {
    /// For a rate (CPU): noisy per sample, its mean over a window is the load of that window.
    case mean
    /// For a small count (fds, threads): it moves in steps of one at the instant of a sample (a connection
    /// being replaced, a Dispatch worker retiring), and the median over a window is the level it held.
    case median
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
    /// the `statistic` of consecutive runs of `window` samples.
    static func judge(
        _ name: String,
        samples: [SoakSample],
        warmup: Double,
        tolerance: Double,
        window: Int = 1,
        statistic: SoakWindowStatistic = .mean,
        value: (SoakSample) -> Double?
    ) -> SoakMetricVerdict? {
        let values = windowed(
            samples.filter { $0.elapsed >= warmup }.compactMap(value),
            window: window,
            statistic: statistic
        )
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
        windowed(values, window: window, statistic: .mean)
    }

    /// The `statistic` of consecutive, non-overlapping runs of `window` values; a shorter last run
    /// counts only when it is the only one.
    static func windowed(_ values: [Double], window: Int, statistic: SoakWindowStatistic) -> [Double] {
        guard window > 1, values.count >= window else { return values }
        return stride(from: 0, through: values.count - window, by: window).map { start in
            let run = values[start..<(start + window)]
            switch statistic {
            case .mean: return run.reduce(0, +) / Double(window)
            case .median: return median(Array(run))
            }
        }
    }

    /// The middle value; the mean of the two middle values of an even count.
    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }
}

/// The soak's metric rules, decided before a run (docs/reliability.md, "Soak"): which metrics are judged,
/// on what, and which are only shown.
enum SoakMetricRules {
    /// Samples per window for a window of `seconds`, at one sample every `sampleEvery` seconds (at least 1).
    static func window(seconds: Double, sampleEvery: Double) -> Int {
        max(1, Int((seconds / sampleEvery).rounded()))
    }

    /// Memory on RSS less SQLite's heap when the heap was read (else RSS): per sample. Open fds and threads
    /// on the medians of `countWindow` samples, CPU on the means of `cpuWindow` samples. `shown` are RSS
    /// and SQLite's heap beside the memory judged, not judged themselves.
    static func verdicts(
        samples: [SoakSample],
        warmup: Double,
        tolerance: Double,
        cpuWindow: Int,
        countWindow: Int
    ) -> (judged: [SoakMetricVerdict], shown: [SoakMetricVerdict]) {
        func mebibytes(_ bytes: Int?) -> Double? { bytes.map { Double($0) / 1_048_576 } }
        // Memory is judged on RSS less SQLite's heap when it was read: SQLite's page caches are bounded by
        // cache_size but fill as the store grows (registrations, the ledger), in proportion to data.
        let rss = SoakMetricVerdict.judge("RSS (MiB)", samples: samples, warmup: warmup, tolerance: tolerance) {
            mebibytes($0.rssBytes)
        }
        let rssLessSQLite = SoakMetricVerdict.judge(
            "RSS less SQLite heap (MiB)",
            samples: samples,
            warmup: warmup,
            tolerance: tolerance
        ) { mebibytes($0.rssLessSQLiteBytes) }
        let sqliteHeap = SoakMetricVerdict.judge(
            "SQLite heap (MiB)",
            samples: samples,
            warmup: warmup,
            tolerance: tolerance
        ) { mebibytes($0.sqliteHeapBytes) }
        let counts = countWindow > 1 ? ", \(countWindow)-sample medians" : ""
        let judged: [SoakMetricVerdict] = [
            rssLessSQLite ?? rss,
            .judge(
                "open fds\(counts)",
                samples: samples,
                warmup: warmup,
                tolerance: tolerance,
                window: countWindow,
                statistic: .median
            ) { $0.fileDescriptors.map(Double.init) },
            .judge(
                "threads\(counts)",
                samples: samples,
                warmup: warmup,
                tolerance: tolerance,
                window: countWindow,
                statistic: .median
            ) { $0.threads.map(Double.init) },
            .judge(
                "CPU (% of a core, \(cpuWindow)-sample means)",
                samples: samples,
                warmup: warmup,
                tolerance: tolerance,
                window: cpuWindow
            ) { $0.cpuShare.map { $0 * 100 } },
        ].compactMap { $0 }
        return (judged, rssLessSQLite == nil ? [] : [rss, sqliteHeap].compactMap { $0 })
    }
}
