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
        /// Targets neither accepted nor failed, over the requests (`targets - accepted - failed`).
        var unaccounted = 0
        /// Of those, the devices the store shows invalidated after the request was stored and skipped
        /// by fan-out without an outcome (``SoakProbes/skippedInvalidated(databasePath:requestIDs:)``).
        var skippedInvalidated = 0
        /// Unaccounted targets the store does not explain: lost.
        var unexplained = 0
        /// Skipped devices beyond a request's unaccounted targets (a device invalidated within the same
        /// millisecond as the request was stored, counted neither way): a limit of the check, not a loss.
        var overExplained = 0
        /// Outcomes beyond a request's targets (`accepted + failed - targets`, where positive).
        var overCounted = 0
        /// Requests with unexplained targets: (id, unaccounted, skipped).
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
    /// Whether the store could be asked about skipped devices (else every unaccounted target is lost).
    var storeChecked: Bool

    /// The ids of the finished requests whose targets are not all accepted or failed: the ones to ask
    /// the store about.
    static func requestsWithUnaccountedTargets(_ doneLines: [GatewayLogLine]) -> [String] {
        doneLines.compactMap { line in
            guard let id = line.metadata("push.request_id"),
                let targets = line.metadata("push.targets").flatMap(Int.init)
            else { return nil }
            let accepted = line.metadata("push.accepted").flatMap(Int.init) ?? 0
            let failed = line.metadata("push.failed").flatMap(Int.init) ?? 0
            return targets > accepted + failed ? id : nil
        }
    }

    /// `skippedByRequest`: per request id, the devices fan-out skipped because they were invalidated
    /// after the request was stored (nil: the store could not be read).
    init(
        sent: SoakCounters.Values,
        doneLines: [GatewayLogLine],
        registrationGroup: Int,
        simulatorStats: [String: Any],
        devices: SoakDeviceCheck,
        stoppedLine: GatewayLogLine?,
        skippedByRequest: [String: Int]?
    ) {
        self.sent = sent
        storeChecked = skippedByRequest != nil
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
            let unaccounted = targets - accepted - failed
            let skipped = skippedByRequest?[id] ?? 0
            totals.unaccounted += unaccounted
            totals.overCounted += max(0, -unaccounted)
            totals.skippedInvalidated += min(max(0, unaccounted), skipped)
            totals.overExplained += max(0, skipped - max(0, unaccounted))
            if unaccounted > skipped {
                totals.unexplained += unaccounted - skipped
                totals.unexplainedRequests.append((id, unaccounted, skipped))
            }
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
