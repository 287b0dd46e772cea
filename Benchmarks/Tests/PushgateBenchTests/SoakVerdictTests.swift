import Foundation
import Testing

@testable import pushgate_bench

/// What decides whether a soak passed: the metric drift after the warm-up, and the accounting of
/// every target of every request against the simulator's per-device counts.
@Suite struct SoakVerdictTests {
    private func samples(_ rss: [Double], every seconds: Double = 10) -> [SoakSample] {
        rss.enumerated().map { index, mebibytes in
            SoakSample(elapsed: Double(index) * seconds, rssBytes: Int(mebibytes * 1_048_576))
        }
    }

    private func judgeRSS(_ rss: [Double], warmup: Double) -> SoakMetricVerdict? {
        .judge("RSS", samples: samples(rss), warmup: warmup, tolerance: 0.10) {
            $0.rssBytes.map { Double($0) / 1_048_576 }
        }
    }

    @Test func theReferenceIsTheFirstSampleAfterTheWarmUp() throws {
        // The growth during the warm-up (50 → 100) does not count.
        let verdict = try #require(judgeRSS([50, 80, 100, 104, 109, 102], warmup: 20))
        #expect(verdict.reference == 100)
        #expect(verdict.last == 102)
        #expect(verdict.minimum == 100 && verdict.maximum == 109)
        #expect(verdict.passed)
    }

    @Test func aDriftBeyondTheToleranceFails() throws {
        let verdict = try #require(judgeRSS([100, 105, 111], warmup: 0))
        #expect(abs(verdict.drift - 0.11) < 1e-9)
        #expect(!verdict.passed)
        let shrinking = try #require(judgeRSS([100, 95, 89], warmup: 0))
        #expect(!shrinking.passed)
    }

    @Test func noSampleAfterTheWarmUpGivesNoVerdict() {
        #expect(judgeRSS([100, 200], warmup: 60) == nil)
    }

    @Test func aNoisyRateIsJudgedOnWindowMeans() {
        #expect(SoakMetricVerdict.windowMeans([1, 3, 5, 7, 9], window: 2) == [2, 6])
        #expect(SoakMetricVerdict.windowMeans([1, 3, 5], window: 1) == [1, 3, 5])
        #expect(SoakMetricVerdict.windowMeans([1, 3], window: 4) == [1, 3])
        let cpu = [10.0, 20, 10, 20, 10, 20].enumerated().map { SoakSample(elapsed: Double($0), cpuShare: $1) }
        let perSample = SoakMetricVerdict.judge("CPU", samples: cpu, warmup: 0, tolerance: 0.1) { $0.cpuShare }
        let windowed = SoakMetricVerdict.judge("CPU", samples: cpu, warmup: 0, tolerance: 0.1, window: 2) {
            $0.cpuShare
        }
        #expect(perSample?.passed == false)
        #expect(windowed?.passed == true)
    }

    private func done(
        targets: Int,
        accepted: Int,
        failed: Int,
        reasons: String = "",
        state: String = "done",
        id: String = "1",
        skipped: Int = 0
    )
        -> GatewayLogLine
    {
        let text =
            "2026-11-25T05:00:00+0000 info pushgate.dispatch: push.accepted=\(accepted) push.app=default "
            + "push.duration_s=0.5 push.failed=\(failed) push.failed_by_reason=\(reasons) push.request_id=\(id) "
            + "push.skipped=\(skipped) push.targets=\(targets) [PushgateDispatch] notification request \(state)"
        return GatewayLogLine(text: text, arrivedAt: .now)
    }

    private func accounting(
        sent: (broadcasts: Int, singles: Int),
        lines: [GatewayLogLine],
        uniqueByDevice: [Int],
        skippedInStore: [String: Int]? = [:]
    ) -> SoakAccounting {
        var values = SoakCounters.Values()
        values.broadcasts = sent.broadcasts
        values.singles = sent.singles
        var devices = SoakDeviceCheck()
        devices.uniqueByDevice = uniqueByDevice
        devices.activeDevices = uniqueByDevice.count
        devices.uniqueAccepted = uniqueByDevice.reduce(0, +)
        return SoakAccounting(
            sent: values,
            doneLines: lines,
            registrationGroup: 10,
            simulatorStats: ["accepted": 40, "duplicates": 1, "rejected_by_reason": ["Unregistered": 1]],
            devices: devices,
            stoppedLine: nil,
            skippedInStore: skippedInStore
        )
    }

    @Test func everyTargetAccountedForIsNoLoss() {
        // Two broadcasts to 20 devices (one unregistered, one 503 that ran out of retries), one single.
        let lines = [
            done(targets: 20, accepted: 19, failed: 1, reasons: "Unregistered=1"),
            done(targets: 19, accepted: 18, failed: 1, reasons: "ServiceUnavailable=1"),
            done(targets: 5, accepted: 5, failed: 0),
        ]
        let a = accounting(
            sent: (2, 1),
            lines: lines,
            uniqueByDevice: Array(repeating: 2, count: 18) + [1]
        )
        #expect(a.broadcasts.requests == 2 && a.singles.requests == 1)
        #expect(a.broadcasts.failedByReason == ["Unregistered": 1, "ServiceUnavailable": 1])
        #expect(a.broadcastShortfall == 1)
        #expect(a.broadcastFailedNotUnregistered == 1)
        #expect(a.lost == 0)
        #expect(a.notFinished == 0)
        #expect(a.simulatorDuplicates == 1)
    }

    @Test func aDeviceShortOfABroadcastWithoutAFailureIsLost() {
        let lines = [done(targets: 19, accepted: 19, failed: 0), done(targets: 19, accepted: 19, failed: 0)]
        let a = accounting(sent: (2, 0), lines: lines, uniqueByDevice: Array(repeating: 2, count: 18) + [1])
        #expect(a.lost == 1)
    }

    @Test func targetsNeitherAcceptedNorFailedAreLost() {
        let lines = [done(targets: 19, accepted: 17, failed: 1, reasons: "ServiceUnavailable=1")]
        let a = accounting(sent: (1, 0), lines: lines, uniqueByDevice: Array(repeating: 1, count: 17) + [0, 0])
        #expect(a.broadcasts.unexplained == 1)
        #expect(a.lost == 1 + 1)  // the unaccounted target, and the device short beyond the one failure
    }

    @Test func aRequestWithoutItsLineIsLostAndAnUnfinishedStateCounts() {
        let lines = [done(targets: 5, accepted: 5, failed: 0, state: "expired")]
        let a = accounting(sent: (0, 2), lines: lines, uniqueByDevice: [])
        #expect(a.requestsMissing == 1)
        #expect(a.lost == 1)
        #expect(a.notFinished == 1)
    }

    // Lead (4) of the one-hour run: 5 targets "unaccounted" in requests logged done. Fan-out skips a device
    // invalidated (410) after the request was stored; `targets` counted it, and the line reports it as
    // `push.skipped`, so that `targets = accepted + failed + skipped`.

    @Test func targetsTheGatewayReportsSkippedAreNotLost() {
        // A broadcast stored before device 0's 410 was recorded; by its page, device 0 was invalid.
        let lines = [
            done(targets: 20, accepted: 18, failed: 1, reasons: "Unregistered=1", id: "b1", skipped: 1),
            done(targets: 18, accepted: 18, failed: 0, id: "b2"),
        ]
        let a = accounting(
            sent: (2, 0),
            lines: lines,
            uniqueByDevice: Array(repeating: 2, count: 18),
            skippedInStore: ["b1": 1]
        )
        #expect(a.broadcasts.skipped == 1)
        #expect(a.broadcasts.unexplained == 0 && a.broadcasts.overCounted == 0)
        #expect(a.broadcasts.skippedNotInStore == 0)
        #expect(a.lost == 0)
        #expect(SoakAccounting.requestsWithSkippedTargets(lines) == ["b1"])
        // The store's cross-check does not decide the loss: a skip it does not show is reported apart.
        let unconfirmed = accounting(sent: (2, 0), lines: lines, uniqueByDevice: Array(repeating: 2, count: 18))
        #expect(unconfirmed.broadcasts.skippedNotInStore == 1 && unconfirmed.lost == 0)
        let unread = accounting(
            sent: (2, 0),
            lines: lines,
            uniqueByDevice: Array(repeating: 2, count: 18),
            skippedInStore: nil
        )
        #expect(!unread.storeChecked && unread.lost == 0)
    }

    @Test func targetsNeitherAcceptedFailedNorSkippedAreLost() {
        let lines = [done(targets: 20, accepted: 17, failed: 1, reasons: "Unregistered=1", id: "b1", skipped: 1)]
        let uniqueByDevice = Array(repeating: 1, count: 17) + [0]
        let a = accounting(sent: (1, 0), lines: lines, uniqueByDevice: uniqueByDevice, skippedInStore: ["b1": 1])
        #expect(a.broadcasts.unexplained == 1)
        #expect(a.broadcasts.unexplainedRequests.map(\.id) == ["b1"])
        #expect(a.broadcasts.unexplainedRequests.map(\.skipped) == [1])
        // The device short of the broadcast is not covered by a failure (other than 410) either.
        #expect(a.lost == 1 + 1)
        // More accepted, failed and skipped than targets is over-counted, not lost.
        let over = accounting(
            sent: (1, 0),
            lines: [done(targets: 20, accepted: 19, failed: 1, reasons: "Unregistered=1", id: "b1", skipped: 1)],
            uniqueByDevice: Array(repeating: 1, count: 19)
        )
        #expect(over.broadcasts.overCounted == 1 && over.broadcasts.unexplained == 0)
    }

    @Test func memoryIsJudgedLessSQLitesHeapWhenItWasRead() {
        // RSS grows by exactly what SQLite's page caches took: the rest is flat.
        let samples = [(100.0, 20.0), (120, 40), (125, 45)].enumerated().map { index, pair in
            SoakSample(
                elapsed: Double(index) * 300,
                rssBytes: Int(pair.0 * 1_048_576),
                sqliteHeapBytes: Int(pair.1 * 1_048_576)
            )
        }
        let rss = SoakMetricVerdict.judge("RSS", samples: samples, warmup: 0, tolerance: 0.1) {
            $0.rssBytes.map { Double($0) / 1_048_576 }
        }
        let rest = SoakMetricVerdict.judge("RSS less SQLite", samples: samples, warmup: 0, tolerance: 0.1) {
            $0.rssLessSQLiteBytes.map { Double($0) / 1_048_576 }
        }
        #expect(rss?.passed == false)
        #expect(rest?.passed == true && rest?.reference == 80)
        #expect(SoakSample(elapsed: 0, rssBytes: 10).rssLessSQLiteBytes == nil)
    }
}
