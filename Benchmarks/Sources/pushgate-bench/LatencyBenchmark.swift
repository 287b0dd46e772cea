import APNsHTTP2
import APNsSimulator
import ArgumentParser
import Foundation
import Logging
import Synchronization

/// `pushgate-bench latency`: one notification at a time through a warm connection.
struct LatencyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "latency",
        abstract: "One notification at a time through the gateway (a child process): datagram to APNs, p50/p99/max.",
        discussion: """
            The simulator runs in this process with a handler that reads the clock when the request \
            reaches it, so both ends of each sample are read from one clock in one process. One device \
            in one group; each request is sent after the previous one is done in the gateway's log.
            """
    )

    @OptionGroup var gateway: GatewayBenchOptions

    @Option(help: "Timed samples.")
    var samples: Int = 1_000

    @Option(help: "Samples sent first and not timed (the connection opens and warms up).")
    var warmup: Int = 50

    func validate() throws {
        guard samples >= 1 else { throw ValidationError("--samples must be at least 1") }
        guard warmup >= 1 else {
            throw ValidationError("--warmup must be at least 1 (the first one opens the connection)")
        }
    }

    func run() async throws {
        ChildProcesses.installSignalHandlers()
        let report = Report(json: false)
        do {
            try await LatencyBenchmark(command: self, report: report).run()
        } catch let error as BenchError {
            report.line("pushgate-bench latency: \(error.description)")
            throw ExitCode.failure
        }
    }
}

struct LatencyBenchmark {
    static let group = "latency"

    let command: LatencyCommand
    let report: Report

    /// When the simulator's handler saw each sample (by the number in its payload).
    final class Arrivals: Sendable {
        private let seen = Mutex<[Int: ContinuousClock.Instant]>([:])

        func record(_ sample: Int, at instant: ContinuousClock.Instant) {
            seen.withLock { seen in
                if seen[sample] == nil { seen[sample] = instant }
            }
        }

        func arrival(of sample: Int) -> ContinuousClock.Instant? { seen.withLock { $0[sample] } }
    }

    static func datagram(sample: Int) -> [UInt8] {
        Array(#"{"groups":["latency"],"type":"urgent","payload":{"aps":{"alert":"latency"},"sample":\#(sample)}}"#.utf8)
    }

    /// The number after `"sample":` in a payload.
    static func sampleNumber(in payload: [UInt8]) -> Int? {
        let marker = Array(#""sample":"#.utf8)
        guard payload.count > marker.count else { return nil }
        for start in 0...(payload.count - marker.count) where payload[start] == marker[0] {
            guard payload[start..<(start + marker.count)].elementsEqual(marker) else { continue }
            var value = 0
            var index = start + marker.count
            var digits = 0
            while index < payload.count, (48...57).contains(payload[index]) {
                value = value * 10 + Int(payload[index] - 48)
                index += 1
                digits += 1
            }
            return digits > 0 ? value : nil
        }
        return nil
    }

    func run() async throws {
        let options = command.gateway
        let binary = try options.binary()
        let work = try options.makeWorkDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let key = try ThrowawayKey.make()
        let keyPath = try key.write(in: work)
        let database = work.appendingPathComponent("latency.db").path
        _ = try await StoreFill.fill(path: database, devices: 1, group: Self.group)

        report.line(
            "pushgate-bench latency: \(Format.integer(command.samples)) samples after \(command.warmup) warm-up, one at a time, one device"
        )
        report.line("  store: \(database) (\(FileSystem.describe(work.path)))")
        report.line(
            "  machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(FileSystem.loadAverage() ?? "?") at start"
        )

        if options.apnsHost != nil || options.rttMilliseconds != nil {
            report.line("  stand-in: \(StandIn.describe(options))")
            report.line("  no APNs-side clock there: only datagram → the gateway's 'done' line is measured")
            try await StandIn.with(options: options, workDirectory: work, keyPath: keyPath) { standIn in
                try await measure(binary: binary, database: database, keyPath: keyPath, standIn: standIn, arrivals: nil)
            }
            return
        }

        var configuration = APNsSimulator.Configuration()
        let arrivals = Arrivals()
        configuration.handling = .scripted { request in
            // First thing on the simulator's event loop once the request (headers and payload) is in.
            let now = ContinuousClock.now
            if let sample = LatencyBenchmark.sampleNumber(in: request.payload) { arrivals.record(sample, at: now) }
            return .accept
        }
        configuration.tracksDevices = false
        configuration.recordLimit = 100
        configuration.environment = .production
        configuration.eventLoopThreads = options.simulatorThreads
        configuration.maxConcurrentStreams = options.maxConcurrentStreams
        configuration.tokenKeys = [
            try ProviderTokenKey(
                keyID: ThrowawayKey.keyID,
                teamID: ThrowawayKey.teamID,
                publicKeyPEM: key.privateKeyPEM
            )
        ]
        var logger = Logger(label: "pushgate.bench.simulator")
        logger.logLevel = .warning
        configuration.logger = logger
        report.line(
            "  stand-in: our simulator in this process (scripted accept-all handler that reads the clock), \(options.simulatorThreads) thread(s)"
        )
        try await APNsSimulator.withRunning(configuration) { running in
            try await measure(
                binary: binary,
                database: database,
                keyPath: keyPath,
                standIn: StandIn(host: running.host, port: running.port, caPath: running.caCertificatePath),
                arrivals: arrivals
            )
        }
    }

    private func measure(
        binary: String,
        database: String,
        keyPath: String,
        standIn: StandIn,
        arrivals: Arrivals?
    ) async throws {
        let options = command.gateway
        let gateway = try GatewayProcess.start(
            GatewayLaunch(
                binary: binary,
                databasePath: database,
                apnsHost: standIn.authority,
                caPath: standIn.caPath,
                authKeyPath: keyPath,
                topic: options.topic,
                extraArguments: options.gatewayArguments
            )
        )
        do {
            let ports = try await gateway.waitForReady(timeout: 60)
            let sender = try DatagramSender()
            await options.waitForQuietMachine(report: report)
            var toAPNs: [Double] = []
            var toDoneLine: [Double] = []
            let gatewayBefore = gateway.cpu()
            let machineBefore = ProcessMetrics.machineCPU()
            let total = command.warmup + command.samples
            for sample in 0..<total {
                let datagram = Self.datagram(sample: sample)
                let sentAt = ContinuousClock.now
                guard sender.send(datagram, port: ports.notification) else { throw BenchError("sendto failed") }
                if let arrivals {
                    let deadline = sentAt + .seconds(30)
                    while arrivals.arrival(of: sample) == nil {
                        guard ContinuousClock.now < deadline else {
                            throw BenchError("sample \(sample) did not reach the simulator within 30 s")
                        }
                        try gateway.checkAlive("during sample \(sample)")
                        try await Task.sleep(for: .microseconds(200))
                    }
                    if sample >= command.warmup, let arrival = arrivals.arrival(of: sample) {
                        toAPNs.append((arrival - sentAt).seconds)
                    }
                }
                // One at a time: the next datagram goes once the gateway has finished this request.
                guard
                    let done = try await gateway.waitForLines(
                        containing: "notification request done",
                        count: sample + 1,
                        timeout: 30
                    )
                else { throw BenchError("sample \(sample): no 'notification request done' line within 30 s") }
                if sample >= command.warmup, let line = done.last {
                    toDoneLine.append((line.arrivedAt - sentAt).seconds)
                }
            }
            let gatewayAfter = gateway.cpu()
            let machineAfter = ProcessMetrics.machineCPU()
            if arrivals != nil {
                line("datagram → request at the simulator", Percentiles(toAPNs))
            }
            line("datagram → the gateway's 'done' line read here", Percentiles(toDoneLine))
            var gatewayCPU: CPUTime? = nil
            if let gatewayBefore, let gatewayAfter { gatewayCPU = gatewayAfter - gatewayBefore }
            var cpu = "  gateway CPU over the samples: \(gatewayCPU.map(Format.cpu) ?? "?")"
            if let before = machineBefore, let after = machineAfter {
                cpu += "; whole machine busy \(Format.seconds(after.busy - before.busy)) s"
            }
            report.line(cpu)
            report.line("  gateway peak RSS (VmHWM): \(Format.mebibytes(gateway.peakRSS()))")
        } catch {
            await gateway.stop()
            throw error
        }
        await gateway.stop()
    }

    private func line(_ what: String, _ values: Percentiles) {
        report.line(
            "\(what) (\(Format.integer(values.sorted.count)) samples): p50 \(Format.milliseconds(values.value(0.5))), p99 \(Format.milliseconds(values.value(0.99))), max \(Format.milliseconds(values.maximum)), mean \(Format.milliseconds(values.mean))"
        )
    }
}
