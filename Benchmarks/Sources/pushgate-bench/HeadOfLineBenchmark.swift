import ArgumentParser
import Foundation
import Synchronization

/// `pushgate-bench hol`: one-device requests sent during a large broadcast, and the broadcast with and
/// without them (issue #23).
struct HeadOfLineCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hol",
        abstract:
            "Single-device requests during a broadcast: their latency, and the broadcast's rate with and without them.",
        discussion: """
            Two phases, each with a fresh copy of the same store, a fresh haproxy stand-in (every answer \
            held --rtt-ms, default 50) and a fresh gateway: a broadcast to --devices devices alone, then \
            the same broadcast with, from --singles-after-ms after it was sent, one single-device \
            request every --singles-every-ms until the gateway logs the broadcast done. Each single's \
            latency is its send → the stand-in's receipt (matched by the sequence number in its \
            payload); the broadcast's time is its datagram → its 'done' line.
            """
    )

    @OptionGroup var gateway: GatewayBenchOptions

    @Option(help: "Devices of the broadcast (one group).")
    var devices: Int = 1_000_000

    @Option(name: .customLong("singles-after-ms"), help: "The first single this long after the broadcast's datagram.")
    var singlesAfterMilliseconds: Int = 1_000

    @Option(name: .customLong("singles-every-ms"), help: "Then one single every this many milliseconds.")
    var singlesEveryMilliseconds: Int = 100

    @Option(name: .customLong("single-devices"), help: "Devices the singles go to in turn, each alone in its group.")
    var singleDevices: Int = 1_000

    @Flag(name: .customLong("singles-only"), help: "Skip the phase without singles.")
    var singlesOnly = false

    static let defaultRTTMilliseconds = 50

    func validate() throws {
        guard (1...50_000_000).contains(devices) else { throw ValidationError("--devices must be 1...50000000") }
        guard (0...600_000).contains(singlesAfterMilliseconds) else {
            throw ValidationError("--singles-after-ms must be 0...600000")
        }
        guard (1...60_000).contains(singlesEveryMilliseconds) else {
            throw ValidationError("--singles-every-ms must be 1...60000")
        }
        guard (1...1_000_000).contains(singleDevices) else {
            throw ValidationError("--single-devices must be 1...1000000")
        }
        if gateway.apnsHost != nil {
            throw ValidationError("hol times receipts at its own haproxy stand-in: it excludes --apns-host")
        }
    }

    func run() async throws {
        ChildProcesses.installSignalHandlers()
        let report = Report(json: false)
        do {
            try await HeadOfLineBenchmark(command: self, report: report).run()
        } catch let error as BenchError {
            report.line("pushgate-bench hol: \(error.description)")
            throw ExitCode.failure
        }
    }
}

/// One phase of `hol`.
struct HeadOfLinePhase: Sendable {
    var withSingles: Bool
    /// Datagram → the broadcast's done line read here.
    var broadcastSeconds: Double?
    /// The done line's `push.duration_s` (the gateway's stored → finished).
    var gatewayDuration: Double?
    var broadcastAccepted: Int?
    var singles = TrafficTally(capacity: 0)
    var singlesLateness = SendLateness()
    var gatewayCPU: CPUTime?
    var otherMachineCPUSeconds: Double?
    var gatewayPeakRSSBytes: Int?
    var incomplete: String?
}

struct HeadOfLineBenchmark {
    static let broadcastGroup = "bench"
    static let singlePrefix = "s"
    static let broadcast = #"{"groups":["bench"],"type":"urgent","payload":{"aps":{"alert":"broadcast"}}}"#

    let command: HeadOfLineCommand
    let report: Report

    static func single(index: Int, devices: Int) -> [UInt8] {
        let payload = #"{"aps":{"alert":"single"},"\#(BenchSequence.key)":\#(index)}"#
        return Array(#"{"groups":["\#(singlePrefix)\#(index % devices)"],"type":"urgent","payload":\#(payload)}"#.utf8)
    }

    /// The number of singles a phase can send at most (the tally's size): one per interval until the
    /// timeout.
    private var singlesCapacity: Int {
        command.gateway.timeout * 1_000 / command.singlesEveryMilliseconds + 2
    }

    private var rtt: Int { command.gateway.rttMilliseconds ?? HeadOfLineCommand.defaultRTTMilliseconds }

    func run() async throws {
        let options = command.gateway
        let binary = try options.binary()
        let work = try options.makeWorkDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let key = try ThrowawayKey.make()
        let keyPath = try key.write(in: work)

        report.line(
            "pushgate-bench hol: a broadcast to \(Format.integer(command.devices)) devices, answers held \(rtt) ms; "
                + "singles from \(command.singlesAfterMilliseconds) ms after it, one every \(command.singlesEveryMilliseconds) ms until it is done"
        )
        report.line(
            "  gateway: \(binary) gateway -f -d <copy of the filled store> -l 127.0.0.1 -g 0 -n 0 --http-port=-1 --apns-host … \(options.gatewayArguments.joined(separator: " "))"
        )
        report.line(
            "  stand-in: haproxy, 1 thread (\(HAProxyStandIn.scriptPath)): 200, a fresh apns-id, every answer held \(rtt) ms; logs the receipt time (µs) of each single to this process over UDP"
        )
        report.line("  broadcast: \(Self.broadcast)")
        report.line(
            "  single: \(String(decoding: Self.single(index: 7, devices: command.singleDevices), as: UTF8.self))"
        )
        report.line("  store: \(work.path) (\(FileSystem.describe(work.path)))")
        report.line(
            "  machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(FileSystem.loadAverage() ?? "?") at start"
        )

        let template = work.appendingPathComponent("filled.db").path
        let prefill = try await StoreFill.prefill(path: template, devices: command.devices, group: Self.broadcastGroup)
        let singles = try await StoreFill.fillSingles(
            path: template,
            count: command.singleDevices,
            prefix: Self.singlePrefix
        )
        report.line(
            "fill: \(Format.integer(prefill.created)) devices in group \(Self.broadcastGroup) in \(Format.seconds(prefill.seconds)) s (prefill), "
                + "\(Format.integer(singles.devices)) single devices in \(Format.seconds(singles.seconds)) s"
        )

        var phases: [HeadOfLinePhase] = []
        for withSingles in command.singlesOnly ? [true] : [false, true] {
            await options.waitForQuietMachine(report: report)
            let database = work.appendingPathComponent(withSingles ? "with-singles.db" : "alone.db").path
            try StoreFill.copy(template, to: database)
            let phase = try await runPhase(
                withSingles: withSingles,
                binary: binary,
                database: database,
                keyPath: keyPath
            )
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database + suffix) }
            printPhase(phase)
            phases.append(phase)
        }
        summary(phases)
    }

    private func runPhase(
        withSingles: Bool,
        binary: String,
        database: String,
        keyPath: String
    ) async throws
        -> HeadOfLinePhase
    {
        let listener = try ReceiptListener()
        defer { listener.stop() }
        return try await HAProxyStandIn.with(
            scriptOverride: command.gateway.standInScript,
            rttMilliseconds: rtt,
            logAddress: listener.address
        ) { haproxy in
            try await measure(
                withSingles: withSingles,
                binary: binary,
                database: database,
                keyPath: keyPath,
                haproxy: haproxy,
                listener: listener
            )
        }
    }

    private func measure(
        withSingles: Bool,
        binary: String,
        database: String,
        keyPath: String,
        haproxy: HAProxyStandIn,
        listener: ReceiptListener
    ) async throws -> HeadOfLinePhase {
        let options = command.gateway
        let gateway = try GatewayProcess.start(
            GatewayLaunch(
                binary: binary,
                databasePath: database,
                standIn: haproxy,
                authKeyPath: keyPath,
                options: options
            )
        )
        var phase = HeadOfLinePhase(withSingles: withSingles)
        do {
            let ports = try await gateway.waitForReady(timeout: 60)
            let sender = try DatagramSender()
            // Warm-up: one single without a sequence number opens the APNs connection.
            let warmup = Array(
                #"{"groups":["\#(Self.singlePrefix)0"],"type":"urgent","payload":{"aps":{"alert":"warm-up"}}}"#.utf8
            )
            guard sender.send(warmup, port: ports.notification) else { throw BenchError("sendto failed") }
            guard try await gateway.waitForLines(containing: "notification request done", count: 1, timeout: 60) != nil
            else { throw BenchError("the warm-up request was not done within 60 s") }

            let recorder = TrafficRecorder(capacity: singlesCapacity)
            listener.record(into: recorder)
            let broadcastDone = Atomic<Bool>(false)
            let machineBefore = ProcessMetrics.machineCPU()
            let gatewayBefore = gateway.cpu()
            let standInBefore = ProcessMetrics.processCPU(pid: haproxy.pid)
            let ownBefore = ProcessMetrics.selfCPU()
            let start = ContinuousClock.now
            guard sender.send(Array(Self.broadcast.utf8), port: ports.notification) else {
                throw BenchError("sendto failed for the broadcast")
            }
            let singleDevices = command.singleDevices
            let port = ports.notification
            let schedule = PacingSchedule(
                rate: 1_000 / Double(command.singlesEveryMilliseconds),
                total: singlesCapacity
            )
            async let singlesResult: PacedSender.Result? =
                withSingles
                ? PacedSender.run(
                    schedule,
                    start: start + .milliseconds(command.singlesAfterMilliseconds),
                    shouldStop: { broadcastDone.load(ordering: .relaxed) }
                ) { index in
                    recorder.sent(index)
                    return sender.send(Self.single(index: index, devices: singleDevices), port: port)
                } : nil

            // The broadcast's done line: the one line for as many targets as the broadcast has.
            let targets = String(command.devices)
            let deadline = start + .seconds(options.timeout)
            var done: GatewayLogLine? = nil
            while done == nil, ContinuousClock.now < deadline {
                done = gateway.log.lines(containing: "notification request ").first {
                    $0.metadata("push.targets") == targets
                }
                if done == nil {
                    try gateway.checkAlive("during the broadcast")
                    try await Task.sleep(for: .milliseconds(5))
                }
            }
            broadcastDone.store(true, ordering: .relaxed)
            let paced = await singlesResult
            if let done {
                phase.broadcastSeconds = (done.arrivedAt - start).seconds
                phase.gatewayDuration = done.metadata("push.duration_s").flatMap(Double.init)
                phase.broadcastAccepted = done.metadata("push.accepted").flatMap(Int.init)
                if !done.text.hasSuffix("notification request done") {
                    phase.incomplete = "the gateway logged: \(done.text)"
                }
            } else {
                phase.incomplete = "no done line for the broadcast within \(options.timeout) s"
            }
            if let paced {
                phase.singlesLateness = paced.lateness
                // The singles sent near the end: up to 30 s more for their answers.
                let singlesDeadline = ContinuousClock.now + .seconds(30)
                while recorder.answered < paced.sent, ContinuousClock.now < singlesDeadline {
                    try gateway.checkAlive("while the singles' receipts were awaited")
                    try await Task.sleep(for: .milliseconds(5))
                }
            }
            let gatewayAfter = gateway.cpu()
            let standInAfter = ProcessMetrics.processCPU(pid: haproxy.pid)
            let ownAfter = ProcessMetrics.selfCPU()
            let machineAfter = ProcessMetrics.machineCPU()
            listener.record(into: nil)
            phase.singles = recorder.snapshot
            if let before = gatewayBefore, let after = gatewayAfter { phase.gatewayCPU = after - before }
            if let before = machineBefore, let after = machineAfter {
                let standIn = standInBefore.flatMap { before in standInAfter.map { ($0 - before).total } } ?? 0
                let ours = (phase.gatewayCPU?.total ?? 0) + standIn + (ownAfter - ownBefore).total
                phase.otherMachineCPUSeconds = max(0, (after.busy - before.busy) - ours)
            }
            phase.gatewayPeakRSSBytes = gateway.peakRSS()
        } catch {
            await gateway.stop()
            throw error
        }
        await gateway.stop()
        return phase
    }

    private func rate(_ phase: HeadOfLinePhase) -> Double? {
        phase.broadcastSeconds.map { Double(command.devices) / $0 }
    }

    private func printPhase(_ phase: HeadOfLinePhase) {
        var first = phase.withSingles ? "with singles:" : "broadcast alone:"
        if let seconds = phase.broadcastSeconds, let rate = rate(phase) {
            first +=
                " \(Format.integer(command.devices)) devices in \(Format.milliseconds(seconds)) (datagram → done line) = \(Format.integer(rate)) targets/s"
        }
        first += "; gateway push.duration_s \(phase.gatewayDuration.map { String(format: "%.3f", $0) } ?? "?")"
        first += ", accepted \(phase.broadcastAccepted.map(Format.integer) ?? "?")"
        if let incomplete = phase.incomplete { first += "; INCOMPLETE: \(incomplete)" }
        report.line(first)
        if phase.withSingles {
            let tally = phase.singles
            report.line(
                "  singles: \(Format.integer(tally.sent)) sent, \(Format.integer(tally.answered)) answered by the stand-in; "
                    + "send → stand-in receipt: \(Percentiles(tally.latencies).summary)"
            )
            report.line("  singles' sender: \(phase.singlesLateness.summary)")
        }
        var cpu = "  gateway CPU: \(phase.gatewayCPU.map(Format.cpu) ?? "?")"
        if let gatewayCPU = phase.gatewayCPU {
            let notifications = command.devices + phase.singles.sent
            cpu += " = \(Format.micro(gatewayCPU.total / Double(notifications) * 1e6)) µs/notification"
        }
        if let other = phase.otherMachineCPUSeconds { cpu += "; other CPU \(Format.seconds(other)) s" }
        cpu += "; peak RSS \(Format.mebibytes(phase.gatewayPeakRSSBytes))"
        report.line(cpu)
    }

    private func summary(_ phases: [HeadOfLinePhase]) {
        report.line("")
        report.line(
            "summary (hol, \(Format.integer(command.devices)) devices, answers held \(rtt) ms, load average \(FileSystem.loadAverage() ?? "?") at the end):"
        )
        let alone = phases.first { !$0.withSingles }
        let mixed = phases.first { $0.withSingles }
        if let alone, let rate = rate(alone) {
            report.line(
                "  broadcast alone: \(Format.integer(rate)) targets/s (\(Format.milliseconds(alone.broadcastSeconds!)))"
            )
        }
        if let mixed, let rate = rate(mixed) {
            var line =
                "  broadcast with singles: \(Format.integer(rate)) targets/s (\(Format.milliseconds(mixed.broadcastSeconds!)))"
            if let alone, let aloneRate = self.rate(alone) {
                line += String(format: "; %+.1f %% against alone", (rate / aloneRate - 1) * 100)
            }
            report.line(line)
        }
        if let mixed {
            let tally = mixed.singles
            report.line(
                "  singles during it: \(Format.integer(tally.answered)) of \(Format.integer(tally.sent)) answered; "
                    + "send → stand-in receipt \(Percentiles(tally.latencies).summary)"
            )
        }
        for phase in phases where phase.incomplete != nil {
            report.line("  INCOMPLETE (\(phase.withSingles ? "with singles" : "alone")): \(phase.incomplete!)")
        }
    }
}
