import Foundation

/// One service's share of an e2e broadcast (APNs or FCM), from its simulator's counters.
struct ServiceRun: Sendable {
    enum Service: String, Sendable {
        case apns = "APNs"
        case fcm = "FCM"
        case webPush = "Web Push"
    }

    var service: Service
    var devices: Int
    /// Datagram sent → the first poll that saw the simulator's answered count (accepted + rejected)
    /// at `devices`; nil when it never did.
    var secondsToCount: Double?
    /// The last poll that still saw fewer.
    var secondsBeforeCount: Double?
    var accepted: Int?
    var rejected: Int?
    /// Distinct devices among the accepted messages, and messages to a device accepted before
    /// (nil when the simulator does not count them).
    var distinctDevices: Int?
    var duplicates: Int?
    /// The simulator process's CPU over the broadcast.
    var standInCPU: CPUTime?

    var notificationsPerSecond: Double? { secondsToCount.map { Double(devices) / $0 } }

    /// Every device got exactly one message, as far as the simulator's counters tell.
    var everyDeviceOnce: Bool? {
        guard let accepted, let rejected else { return nil }
        guard accepted == devices, rejected == 0 else { return false }
        guard let distinctDevices, let duplicates else { return nil }
        return distinctDevices == devices && duplicates == 0
    }

    /// `FCM: 100,000 devices, accepted 100,000, rejected 0, distinct 100,000, duplicates 0 (each once),
    /// last answer at 1.234 s = 81,037/s; simulator CPU 2.1 s = 21 µs/message`.
    var reportLine: String {
        var line = "  \(service.rawValue): \(Format.integer(devices)) devices, "
        line += "accepted \(accepted.map(Format.integer) ?? "?"), rejected \(rejected.map(Format.integer) ?? "?")"
        if let distinctDevices, let duplicates {
            line += ", distinct \(Format.integer(distinctDevices)), duplicates \(Format.integer(duplicates))"
        }
        switch everyDeviceOnce {
        case true?: line += " (each device once)"
        case false?: line += " (NOT each device once)"
        case nil: line += " (per-device counts off)"
        }
        if let seconds = secondsToCount {
            line += "; last answer at \(Format.milliseconds(seconds))"
            line += " (last poll below at \(Format.milliseconds(secondsBeforeCount ?? 0)))"
            if let rate = notificationsPerSecond { line += " = \(Format.integer(rate))/s" }
        } else {
            line += "; its simulator never counted them all"
        }
        if let cpu = standInCPU {
            line += "; simulator CPU \(Format.seconds(cpu.total)) s"
            if devices > 0 { line += " = \(Format.micro(cpu.total / Double(devices) * 1e6)) µs/message" }
        }
        return line
    }
}

/// Polls each service's simulator until it has answered its share of the broadcast.
struct ServiceWatch {
    var service: ServiceRun.Service
    var devices: Int
    /// Accepted + rejected so far.
    var answered: () throws -> Int

    /// Polls every `interval` until each watch has counted its devices or `deadline` passes;
    /// `checkAlive` runs between polls (it throws when the gateway died).
    static func poll(
        _ watches: [ServiceWatch],
        start: ContinuousClock.Instant,
        deadline: ContinuousClock.Instant,
        interval: Duration,
        checkAlive: () throws -> Void
    ) async throws -> [ServiceRun] {
        var runs = watches.map { ServiceRun(service: $0.service, devices: $0.devices) }
        var lastBelow = watches.map { _ in start }
        var pending = Set(watches.indices)
        while !pending.isEmpty && ContinuousClock.now < deadline {
            for index in pending.sorted() {
                let polledAt = ContinuousClock.now
                // A simulator busy answering may not answer its control API in time: no reading, poll again.
                guard let answered = try? watches[index].answered() else { continue }
                if answered >= watches[index].devices {
                    runs[index].secondsToCount = (polledAt - start).seconds
                    runs[index].secondsBeforeCount = (lastBelow[index] - start).seconds
                    pending.remove(index)
                } else {
                    lastBelow[index] = polledAt
                }
            }
            if pending.isEmpty { break }
            try checkAlive()
            try await Task.sleep(for: interval)
        }
        return runs
    }
}

extension EndToEndRun {
    /// The run's time from its services: the last of their last answers, once all counted theirs.
    mutating func take(_ services: [ServiceRun]) {
        self.services = services
        guard !services.isEmpty else { return }
        let missing = services.filter { $0.secondsToCount == nil }
        if missing.isEmpty, let last = services.max(by: { $0.secondsToCount! < $1.secondsToCount! }) {
            secondsToSimulatorCount = last.secondsToCount
            secondsBeforeSimulatorCount = last.secondsBeforeCount
        } else {
            let names = missing.map { "\($0.service.rawValue) \(Format.integer($0.devices))" }
            incomplete = "the simulator did not count its answers in time (\(names.joined(separator: ", ")))"
        }
    }
}

extension EndToEndBenchmark {
    /// Fills each service's counters in from its simulator, after the broadcast.
    func recordCounters(_ result: inout EndToEndRun, standIn: StandIn, fcm: FCMStandIn?, fcmCPU: CPUTime?) {
        for index in result.services.indices {
            switch result.services[index].service {
            case .apns:
                result.services[index].accepted = result.simulatorAccepted
                result.services[index].rejected = result.simulatorRejected
                result.services[index].standInCPU = result.simulatorCPU
            case .fcm:
                guard let stats = try? fcm?.stats() else { continue }
                result.services[index].accepted = stats.accepted
                result.services[index].rejected = stats.rejected
                result.services[index].distinctDevices = stats.devices
                result.services[index].duplicates = stats.duplicates
                result.services[index].standInCPU = fcmCPU
            case .webPush:
                continue  // e2e has no Web Push share (webpush-gateway measures it)
            }
        }
        if result.incomplete == nil, let wrong = result.services.first(where: { $0.everyDeviceOnce == false }) {
            result.incomplete = "\(wrong.service.rawValue): not every device got exactly one message"
        }
    }

    /// Per service, over the complete runs: time to its last answer, its rate, its simulator's CPU.
    func serviceSummary(_ runs: [EndToEndRun]) {
        for service in [ServiceRun.Service.apns, .fcm] {
            let shares = runs.compactMap { $0.services.first { $0.service == service } }
            let seconds = shares.compactMap(\.secondsToCount)
            guard let devices = shares.first?.devices, !seconds.isEmpty else { continue }
            let time = Spread(seconds)
            let rates = Spread(shares.compactMap(\.notificationsPerSecond))
            var line = "  \(service.rawValue) (\(Format.integer(devices)) devices): last answer at "
            line += "\(Format.milliseconds(time.median)) (\(Format.milliseconds(time.minimum))-"
            line += "\(Format.milliseconds(time.maximum))), \(Format.integer(rates.median))/s "
            line += "(\(Format.integer(rates.minimum))-\(Format.integer(rates.maximum)))"
            let cpu = shares.compactMap { $0.standInCPU.map { $0.total / Double(devices) * 1e6 } }
            if !cpu.isEmpty { line += "; its simulator \(Format.micro(Spread(cpu).median)) µs/message" }
            let once = shares.allSatisfy { $0.everyDeviceOnce == true }
            line += once ? "; each device exactly once in every run" : ""
            report.line(line)
        }
    }
}
