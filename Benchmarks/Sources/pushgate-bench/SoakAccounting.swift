import Foundation

/// The simulator's per-device counts for the broadcast group, read at the end.
struct SoakDeviceCheck: Sendable {
    /// Active devices: accepted deliveries minus duplicates, summed.
    var uniqueAccepted = 0
    var duplicates = 0
    var activeDevices = 0
    /// Per active device, the distinct deliveries, to compare with the broadcasts.
    var uniqueByDevice: [Int] = []
    /// Devices marked unregistered that were still accepted (should be 0).
    var unregisteredAccepted = 0

    /// Devices the control API did not answer for (counted neither way).
    var unreadable = 0

    static func run(controlPort: Int, devices: Int, unregistered: Set<Int>) -> SoakDeviceCheck {
        var check = SoakDeviceCheck()
        for index in 0..<devices {
            let path = "/devices/\(BenchDevices.tokenHex(index))"
            guard let json = try? ControlAPI.getJSON(port: controlPort, path: path, timeoutSeconds: 30) else {
                check.unreadable += 1
                continue
            }
            let accepted = (json["accepted"] as? NSNumber)?.intValue ?? 0
            let duplicates = (json["duplicates"] as? NSNumber)?.intValue ?? 0
            if unregistered.contains(index) {
                check.unregisteredAccepted += accepted
                continue
            }
            check.activeDevices += 1
            check.uniqueAccepted += accepted - duplicates
            check.duplicates += duplicates
            check.uniqueByDevice.append(accepted - duplicates)
        }
        return check
    }
}

/// Every request's `notification request <state>` line against what was sent, and the simulator's
/// counts against the gateway's.
struct SoakAccounting {
    struct Totals {
        var requests = 0
        var targets = 0
        var accepted = 0
        var failed = 0
        var failedByReason: [String: Int] = [:]
        var states: [String: Int] = [:]
        /// Targets the gateway reported skipped (`push.skipped`: invalidated or removed after the request
        /// was stored; they got nothing, on purpose).
        var skipped = 0
        /// Targets neither accepted, failed nor skipped, over the requests (`targets - accepted - failed -
        /// skipped`, where positive): lost.
        var unexplained = 0
        /// Outcomes beyond a request's targets (`accepted + failed + skipped - targets`, where positive).
        var overCounted = 0
        /// Reported skips the store does not show as devices invalidated after the request was stored
        /// without an outcome (``SoakProbes/skippedInvalidated(databasePath:requestIDs:)``): a cross-check
        /// of the ledger's count (the soak removes no device, so every skip is an invalidation).
        var skippedNotInStore = 0
        /// Requests with unexplained targets: (id, unexplained, skipped).
        var unexplainedRequests: [(id: String, unaccounted: Int, skipped: Int)] = []
    }

    var sent: SoakCounters.Values
    var broadcasts = Totals()
    var singles = Totals()
    var simulatorAccepted: Int
    var simulatorDuplicates: Int
    var simulatorRejectedByReason: [String: Int]
    var devices: SoakDeviceCheck
    var registrationsApplied: String?
    /// Whether the store could be asked to cross-check the reported skips.
    var storeChecked: Bool

    /// The ids of the finished requests that report skipped targets: the ones to cross-check in the store.
    static func requestsWithSkippedTargets(_ doneLines: [GatewayLogLine]) -> [String] {
        doneLines.compactMap { line in
            guard let id = line.metadata("push.request_id"),
                let skipped = line.metadata("push.skipped").flatMap(Int.init), skipped > 0
            else { return nil }
            return id
        }
    }

    /// The loss is judged on the lines alone: `targets = accepted + failed + skipped` per request.
    /// `skippedInStore`: per request id, the devices the store shows invalidated after the request was
    /// stored without an outcome, a cross-check of the reported skips (nil: the store could not be read).
    init(
        sent: SoakCounters.Values,
        doneLines: [GatewayLogLine],
        registrationGroup: Int,
        simulatorStats: [String: Any],
        devices: SoakDeviceCheck,
        stoppedLine: GatewayLogLine?,
        skippedInStore: [String: Int]?
    ) {
        self.sent = sent
        storeChecked = skippedInStore != nil
        for line in doneLines {
            guard let targets = line.metadata("push.targets").flatMap(Int.init) else { continue }
            let accepted = line.metadata("push.accepted").flatMap(Int.init) ?? 0
            let failed = line.metadata("push.failed").flatMap(Int.init) ?? 0
            let id = line.metadata("push.request_id") ?? "?"
            let state = line.text.split(separator: " ").last.map(String.init) ?? "?"
            // A broadcast targets the big group; a single one registration group at most.
            let isBroadcast = targets > registrationGroup
            var totals = isBroadcast ? broadcasts : singles
            totals.requests += 1
            totals.targets += targets
            totals.accepted += accepted
            totals.failed += failed
            let skipped = line.metadata("push.skipped").flatMap(Int.init) ?? 0
            let unaccounted = targets - accepted - failed - skipped
            totals.skipped += skipped
            totals.overCounted += max(0, -unaccounted)
            if unaccounted > 0 {
                totals.unexplained += unaccounted
                totals.unexplainedRequests.append((id, unaccounted, skipped))
            }
            if let skippedInStore { totals.skippedNotInStore += max(0, skipped - (skippedInStore[id] ?? 0)) }
            totals.states[state, default: 0] += 1
            for pair in (line.metadata("push.failed_by_reason") ?? "").split(separator: ",") {
                let parts = pair.split(separator: "=")
                if parts.count == 2, let count = Int(parts[1]) {
                    totals.failedByReason[String(parts[0]), default: 0] += count
                }
            }
            if isBroadcast { broadcasts = totals } else { singles = totals }
        }
        simulatorAccepted = (simulatorStats["accepted"] as? NSNumber)?.intValue ?? -1
        simulatorDuplicates = (simulatorStats["duplicates"] as? NSNumber)?.intValue ?? -1
        simulatorRejectedByReason = ((simulatorStats["rejected_by_reason"] as? [String: Any]) ?? [:]).mapValues {
            ($0 as? NSNumber)?.intValue ?? 0
        }
        self.devices = devices
        registrationsApplied = stoppedLine?.metadata("udp.registrations_applied")
    }

    var requestsMissing: Int { sent.broadcasts + sent.singles - broadcasts.requests - singles.requests }

    /// Broadcast deliveries the simulator did not see for an active device, beyond what the gateway
    /// reported failed (other than for the unregistered devices): lost.
    var broadcastShortfall: Int {
        devices.uniqueByDevice.reduce(0) { $0 + max(0, broadcasts.requests - $1) }
    }

    var broadcastFailedNotUnregistered: Int {
        broadcasts.failed - (broadcasts.failedByReason["Unregistered"] ?? 0)
    }

    /// Active devices with more distinct deliveries than broadcasts finished (a broadcast counted twice).
    var devicesOverCounted: Int { devices.uniqueByDevice.filter { $0 > broadcasts.requests }.count }

    var lost: Int {
        max(0, broadcastShortfall - broadcastFailedNotUnregistered) + broadcasts.unexplained + singles.unexplained
            + max(0, requestsMissing)
    }

    var notFinished: Int {
        (broadcasts.states.merging(singles.states, uniquingKeysWith: +)).filter {
            $0.key != "done" && $0.key != "failed"
        }
        .values.reduce(0, +)
    }
}
