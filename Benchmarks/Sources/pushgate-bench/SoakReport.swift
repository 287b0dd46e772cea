import Foundation

/// The soak's printed results: totals, the loss check, and the per-metric table.
struct SoakReport {
    let report: Report
    let command: SoakCommand

    static func sampleLine(_ sample: SoakSample) -> String {
        let cpu = sample.cpuShare.map { String(format: "%.1f %%", $0 * 100) } ?? "?"
        return String(format: "[%7.0f s] ", sample.elapsed) + "RSS \(Format.mebibytes(sample.rssBytes)), "
            + "fds \(sample.fileDescriptors.map(String.init) ?? "?"), "
            + "threads \(sample.threads.map(String.init) ?? "?"), "
            + "CPU \(cpu) | simulator RSS \(Format.mebibytes(sample.simulatorRSSBytes)), "
            + "CPU \(sample.simulatorCPUShare.map { String(format: "%.1f %%", $0 * 100) } ?? "?"), "
            + "store \(Format.mebibytes(sample.databaseBytes))"
            + (sample.sqliteHeapBytes.map { ", SQLite heap \(Format.mebibytes($0))" } ?? "")
    }

    /// Prints everything; returns whether the soak passed.
    func finish(accounting a: SoakAccounting, samples: [SoakSample], loadSeconds: Double, drainSeconds: Double?) -> Bool
    {
        report.line("")
        report.line(
            "load: \(Format.seconds(loadSeconds)) s; drain: "
                + "\(drainSeconds.map(Format.seconds) ?? "NOT FINISHED within \(command.drainSeconds)") s"
        )
        report.line(
            "sent: \(a.sent.broadcasts) broadcasts, \(a.sent.singles) single-group notifications, "
                + "\(a.sent.registrations) registrations (send failures \(a.sent.sendFailures)); "
                + "faults: \(a.sent.drops) drops, \(a.sent.bursts) bursts of 429 "
                + "(control failures \(a.sent.controlFailures))"
        )
        report.line("registrations applied (gateway's counter at shutdown): \(a.registrationsApplied ?? "?")")
        for (name, totals) in [("broadcasts", a.broadcasts), ("singles", a.singles)] {
            report.line(
                "\(name): \(totals.requests) finished \(totals.states), targets \(totals.targets), accepted "
                    + "\(totals.accepted), failed \(totals.failed) \(totals.failedByReason), "
                    + "skipped (invalidated after the request was stored) \(totals.skipped), "
                    + "unaccounted (targets - accepted - failed - skipped) \(totals.unexplained), "
                    + "over-counted \(totals.overCounted); skips the store does not show "
                    + "\(a.storeChecked ? String(totals.skippedNotInStore) : "? (store not read)")"
            )
            for request in totals.unexplainedRequests.prefix(10) {
                report.line(
                    "  unaccounted: request \(request.id): \(request.unaccounted) unaccounted, "
                        + "\(request.skipped) skipped"
                )
            }
        }
        report.line(
            "simulator: accepted \(a.simulatorAccepted) (of which duplicates \(a.simulatorDuplicates)), rejected "
                + "\(a.simulatorRejectedByReason); gateway accepted \(a.broadcasts.accepted + a.singles.accepted)"
        )
        report.line(
            "broadcast group, per device: \(a.devices.activeDevices) active devices, distinct deliveries "
                + "\(a.devices.uniqueAccepted) (expected \(a.devices.activeDevices * a.broadcasts.requests) = "
                + "devices × broadcasts), shortfall \(a.broadcastShortfall) vs. failed (not 410) "
                + "\(a.broadcastFailedNotUnregistered), "
                + "devices with more distinct deliveries than broadcasts \(a.devicesOverCounted), duplicates "
                + "\(a.devices.duplicates), unregistered devices accepted \(a.devices.unregisteredAccepted), "
                + "unreadable \(a.devices.unreadable)"
        )
        let lossPassed =
            a.lost == 0 && a.notFinished == 0 && drainSeconds != nil && a.devices.unregisteredAccepted == 0
            && a.devices.unreadable == 0
        report.line(
            "LOSS: \(lossPassed ? "PASS" : "FAIL"): lost \(a.lost) (requests missing \(a.requestsMissing)), "
                + "not finished \(a.notFinished)"
        )

        let warmup = command.warmupSeconds
        let (verdicts, shown) = SoakMetricRules.verdicts(
            samples: samples,
            warmup: warmup,
            tolerance: command.tolerance,
            cpuWindow: SoakMetricRules.window(seconds: command.cpuWindowSeconds, sampleEvery: command.sampleEvery),
            countWindow: SoakMetricRules.window(seconds: command.countWindowSeconds, sampleEvery: command.sampleEvery)
        )
        let first = samples.first
        report.line("")
        report.line(
            "metrics after the warm-up (\(Format.seconds(warmup / 60)) min), "
                + "tolerance ±\(Format.percent(command.tolerance)):"
        )
        report.line("| metric | at start | post-warm-up | last | min | max | drift | verdict |")
        report.line("|---|---|---|---|---|---|---|---|")
        for verdict in verdicts + shown {
            let judged = !shown.contains { $0.name == verdict.name }
            let start: String
            switch verdict.name {
            case "RSS (MiB)": start = first?.rssBytes.map { String(format: "%.1f", Double($0) / 1_048_576) } ?? "?"
            case let name where name.hasPrefix("open fds"): start = first?.fileDescriptors.map(String.init) ?? "?"
            case let name where name.hasPrefix("threads"): start = first?.threads.map(String.init) ?? "?"
            case "SQLite heap (MiB)":
                start = first?.sqliteHeapBytes.map { String(format: "%.1f", Double($0) / 1_048_576) } ?? "?"
            case "RSS less SQLite heap (MiB)":
                start = first?.rssLessSQLiteBytes.map { String(format: "%.1f", Double($0) / 1_048_576) } ?? "?"
            default: start = "-"
            }
            func f(_ value: Double) -> String { String(format: "%.1f", value) }
            report.line(
                "| \(verdict.name) | \(start) | \(f(verdict.reference)) | \(f(verdict.last)) | \(f(verdict.minimum)) | "
                    + "\(f(verdict.maximum)) | \(f(verdict.drift * 100)) % | \(verdict.passed ? "pass" : "FAIL")"
                    + "\(judged ? "" : " (shown, not judged)") |"
            )
        }
        if !shown.isEmpty {
            report.line(
                "memory is judged on RSS less SQLite's heap (sqlite3_status64 counters read from /proc/PID/mem): "
                    + "SQLite's page caches are bounded by cache_size but fill as the store grows"
            )
        }
        if let last = samples.last {
            report.line(
                "simulator RSS: \(Format.mebibytes(first?.simulatorRSSBytes)) → "
                    + "\(Format.mebibytes(last.simulatorRSSBytes)); "
                    + "store: \(Format.mebibytes(first?.databaseBytes)) → \(Format.mebibytes(last.databaseBytes))"
            )
        }
        let metricsPassed = !verdicts.isEmpty && verdicts.allSatisfy(\.passed)
        report.line(
            "SOAK: \(lossPassed && metricsPassed ? "PASS" : "FAIL") (loss \(lossPassed ? "pass" : "FAIL"), "
                + "metrics \(metricsPassed ? "pass" : "FAIL"))"
        )
        return lossPassed && metricsPassed
    }
}
