import Testing

@testable import pushgate_bench

/// Open fds and threads are judged on per-minute medians (docs/reliability.md, "Soak"), decided before the
/// run of 2026-11-27 afternoon: they are small counts that move by one or two at the instant of a sample (an
/// APNs connection being replaced after a drop or a GOAWAY, a Dispatch worker that retired after 5 s idle
/// and comes back at the next broadcast), so one sample is a snapshot of a transient; the median over a
/// minute is the level the process held, and a level that moves and stays moved still fails.
extension SoakVerdictTests {
    /// Samples every 15 s over `minutes`, the metric given per sample index.
    private func counts(minutes: Int, _ value: (Int) -> Int) -> [SoakSample] {
        (0..<(minutes * 4)).map { index in
            SoakSample(elapsed: Double(index) * 15, fileDescriptors: value(index), threads: value(index))
        }
    }

    private func judged(_ samples: [SoakSample]) -> (fds: SoakMetricVerdict?, threads: SoakMetricVerdict?) {
        let (verdicts, _) = SoakMetricRules.verdicts(
            samples: samples,
            warmup: 600,
            tolerance: 0.10,
            cpuWindow: 4,
            countWindow: 4
        )
        return (verdicts.first { $0.name.hasPrefix("open fds") }, verdicts.first { $0.name.hasPrefix("threads") })
    }

    @Test func aCountIsJudgedOnWindowMedians() {
        #expect(SoakMetricVerdict.median([38, 34, 39, 38]) == 38)
        #expect(SoakMetricVerdict.median([3, 1, 2]) == 2)
        let minutes = SoakMetricVerdict.windowed([38, 34, 38, 39, 40, 41, 40, 12], window: 4, statistic: .median)
        #expect(minutes == [38, 40])
        #expect(SoakMetricVerdict.windowed([38, 34], window: 4, statistic: .median) == [38, 34])
        #expect(SoakMetricVerdict.windowed([1, 3, 5, 7], window: 2, statistic: .mean) == [2, 6])
    }

    @Test func aConnectionBeingReplacedAtASampleDoesNotFailTheCounts() throws {
        // 38 fds, and one sample a minute at 34 or 42 (a connection closed, or its replacement open before
        // the old one closed): 10.5 % per sample, 0 % on the medians.
        let samples = counts(minutes: 60) { index in index % 4 == 1 ? (index % 8 == 1 ? 34 : 42) : 38 }
        let perSample = try #require(
            SoakMetricVerdict.judge("open fds", samples: samples, warmup: 600, tolerance: 0.10) {
                $0.fileDescriptors.map(Double.init)
            }
        )
        #expect(!perSample.passed)
        let (fds, threads) = judged(samples)
        #expect(try #require(fds).passed)
        #expect(try #require(fds).reference == 38)
        #expect(try #require(threads).passed)
    }

    @Test func aCountThatStepsUpAndStaysFails() throws {
        // 15 threads for the first 20 minutes, then 17 to the end (what the fourth SQLite reader did in the
        // one-hour run of 2026-11-27 morning): 13.3 % on the medians as on the samples.
        let step = judged(counts(minutes: 60) { $0 < 80 ? 15 : 17 })
        #expect(try #require(step.threads).passed == false)
        #expect(abs(try #require(step.threads).drift - 2.0 / 15) < 1e-9)
        // One more descriptor every 5 minutes (a leak per drop would be faster): fails too.
        let leak = judged(counts(minutes: 60) { 38 + $0 / 20 })
        #expect(try #require(leak.fds).passed == false)
    }

    @Test func theDefaultWindowForCountsIsOneMinuteOfSamples() throws {
        let command = try SoakCommand.parse([])
        #expect(command.countWindowSeconds == 60)
        #expect(SoakMetricRules.window(seconds: command.countWindowSeconds, sampleEvery: command.sampleEvery) == 4)
        // RSS stays judged per sample, CPU on means: only the counts use medians.
        let samples = counts(minutes: 20) { _ in 38 }
        let (verdicts, _) = SoakMetricRules.verdicts(
            samples: samples,
            warmup: 600,
            tolerance: 0.10,
            cpuWindow: 4,
            countWindow: 4
        )
        #expect(verdicts.map(\.name) == ["open fds, 4-sample medians", "threads, 4-sample medians"])
    }
}
