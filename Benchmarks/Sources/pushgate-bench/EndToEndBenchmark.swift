import ArgumentParser
import Foundation
import Synchronization

/// `pushgate-bench e2e`: one broadcast through the whole gateway, from the UDP datagram to the last
/// APNs answer.
struct EndToEndCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "e2e",
        abstract: "One broadcast to N devices through the gateway (a child process), against an APNs stand-in.",
        discussion: """
            Fills a fresh SQLite store with N devices in one group (directly, not through UDP), starts \
            `pushgate simulate` (accept-all) and `pushgate gateway` against it, sends one notification \
            request over UDP and measures until the simulator has accepted N notifications and the \
            gateway has logged the request done. Then h2load against the same stand-in, with as many \
            connections as the gateway held open to it and the gateway's streams per connection. \
            --rtt-ms N uses the haproxy stand-in holding every answer N ms instead of the simulator. \
            --fcm-devices N adds N FCM devices to the group (--devices may then be 0) and runs our FCM \
            simulator as a second process; the gateway gets its throwaway service account. With FCM \
            devices, --rtt-ms holds every answer of both simulators (APNs: our simulator's latency_ms \
            fault, not haproxy, so that both count what they accepted), and each service is reported \
            apart: its devices answered (each exactly once), its time to the last answer, its rate.
            """
    )

    @OptionGroup var gateway: GatewayBenchOptions

    @Option(help: "APNs devices in the group (0 with --fcm-devices: an FCM-only broadcast).")
    var devices: Int = 100_000

    @Option(name: .customLong("fcm-devices"), help: "FCM devices in the group, beside the APNs ones.")
    var fcmDevices: Int = 0

    @Option(help: "Runs (each with a fresh copy of the filled store, a fresh simulator and a fresh gateway).")
    var runs: Int = 1

    @Option(name: .customLong("poll-ms"), help: "How often the simulator's accepted count is read, in milliseconds.")
    var pollMilliseconds: Int = 10

    @Option(name: .customLong("h2load"), help: "The h2load executable (Debian: nghttp2-client).")
    var h2loadPath: String = "/usr/bin/h2load"

    @Option(
        name: .customLong("h2load-streams"),
        help: "h2load -m (default: what the stand-in grants, capped by a --max-streams in --gateway-arg)."
    )
    var h2loadStreams: Int?

    @Option(
        name: .customLong("h2load-connections"),
        help: "h2load -c (default: the most connections the gateway held open to the stand-in during the run)."
    )
    var h2loadConnections: Int?

    @Flag(name: .customLong("no-h2load"), help: "Skip h2load.")
    var noH2Load = false

    func validate() throws {
        guard devices >= 0, fcmDevices >= 0 else { throw ValidationError("--devices and --fcm-devices must be ≥ 0") }
        guard devices + fcmDevices >= 1 else { throw ValidationError("--devices + --fcm-devices must be at least 1") }
        if fcmDevices > 0 && gateway.apnsHost != nil {
            throw ValidationError("--fcm-devices needs our simulators: it excludes --apns-host")
        }
        guard (1...20).contains(runs) else { throw ValidationError("--runs must be 1...20") }
        guard (1...1_000).contains(pollMilliseconds) else { throw ValidationError("--poll-ms must be 1...1000") }
        if let h2loadStreams, h2loadStreams < 1 { throw ValidationError("--h2load-streams must be at least 1") }
        if let h2loadConnections, h2loadConnections < 1 {
            throw ValidationError("--h2load-connections must be at least 1")
        }
    }

    func run() async throws {
        ChildProcesses.installSignalHandlers()
        let report = Report(json: false)
        do {
            try await EndToEndBenchmark(command: self, report: report).run()
        } catch let error as BenchError {
            report.line("pushgate-bench e2e: \(error.description)")
            throw ExitCode.failure
        }
    }
}

struct EndToEndRun: Sendable {
    /// All devices of the broadcast, APNs and FCM.
    var devices: Int
    /// Each service's share, when a simulator counted it (empty with haproxy or an external host).
    var services: [ServiceRun] = []
    /// Datagram sent → the first poll that saw the simulator's accepted count at N (nil: external
    /// stand-in, or never reached).
    var secondsToSimulatorCount: Double?
    /// The last poll that still saw fewer: the last answer came between the two.
    var secondsBeforeSimulatorCount: Double?
    /// Datagram sent → this process read the gateway's `notification request done` line.
    var secondsToDoneLine: Double?
    /// `push.duration_s` of that line: the gateway's own stored-to-finished time.
    var gatewayDuration: Double?
    var gatewayAccepted: Int?
    var gatewayFailed: Int?
    var simulatorAccepted: Int?
    var simulatorRejected: Int?
    var connectionsOpened: Int?
    /// The most ESTABLISHED TCP connections to the stand-in's port during the broadcast.
    var connectionsToStandIn: Int?
    /// Over datagram → done line (or the end of waiting).
    var gatewayCPU: CPUTime?
    var simulatorCPU: CPUTime?
    var otherMachineCPUSeconds: Double?
    var gatewayPeakRSSBytes: Int?
    var h2load: H2LoadRunResult?
    var incomplete: String?

    /// The time the rate is computed from: the simulator's count when we have it, else the done line.
    var seconds: Double? { secondsToSimulatorCount ?? secondsToDoneLine }
    var microsecondsPerNotification: Double? { gatewayCPU.map { $0.total / Double(devices) * 1e6 } }
    var notificationsPerSecond: Double? { seconds.map { Double(devices) / $0 } }
}

struct EndToEndBenchmark {
    static let group = "bench"
    static let datagram =
        #"{"groups":["bench"],"type":"urgent","payload":"# + ClientBenchmark.payload + "}"

    let command: EndToEndCommand
    let report: Report

    func run() async throws {
        let options = command.gateway
        let binary = try options.binary()
        let work = try options.makeWorkDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let key = try ThrowawayKey.make()
        let keyPath = try key.write(in: work)

        report.line(
            "pushgate-bench e2e: \(Format.integer(command.devices)) APNs + \(Format.integer(command.fcmDevices)) FCM "
                + "devices in one group, \(command.runs) run(s)"
        )
        report.line(
            "  gateway: \(binary) gateway -f -d <copy of the filled store> -l 127.0.0.1 -g 0 -n 0 --http-port=-1 --apns-host … --auth-key … \(options.gatewayArguments.joined(separator: " "))"
        )
        report.line("  stand-in: \(StandIn.describe(options, simulatorLatency: apnsSimulatorLatency))")
        if command.fcmDevices > 0 {
            report.line("  FCM stand-in: \(FCMStandIn.describe(options))")
            report.line(
                "  gateway FCM: --fcm-service-account <its account file> --fcm-host 127.0.0.1:PORT --fcm-ca <its CA>"
            )
        }
        report.line("  datagram: \(Self.datagram)")
        report.line("  store: \(work.path) (\(FileSystem.describe(work.path)))")
        report.line(
            "  machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(FileSystem.loadAverage() ?? "?") at start"
        )

        let template = work.appendingPathComponent("filled.db").path
        let fill = try await StoreFill.fill(
            path: template,
            devices: command.devices,
            group: Self.group,
            fcmDevices: command.fcmDevices
        )
        report.line(
            "fill: \(Format.integer(fill.devices)) devices (\(Format.integer(fill.created)) created) in \(Format.seconds(fill.seconds)) s = \(Format.integer(Double(fill.devices) / fill.seconds))/s (SQLiteStore.register(batch:), 20,000 per transaction, synchronous=NORMAL)"
        )

        var runs: [EndToEndRun] = []
        for index in 1...command.runs {
            await options.waitForQuietMachine(report: report)
            let database = work.appendingPathComponent("run-\(index).db").path
            try StoreFill.copy(template, to: database)
            let result = try await StandIn.with(
                options: options,
                workDirectory: work,
                keyPath: keyPath,
                simulatorLatency: apnsSimulatorLatency
            ) { standIn in
                try await withFCMStandIn(work: work) { fcm in
                    try await runOnce(binary: binary, database: database, keyPath: keyPath, standIn: standIn, fcm: fcm)
                }
            }
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database + suffix) }
            printRun(result, index: index)
            runs.append(result)
        }
        summary(runs)
    }

    /// With FCM devices, `--rtt-ms` is our APNs simulator's latency fault (haproxy counts nothing).
    private var apnsSimulatorLatency: Int? {
        command.fcmDevices > 0 ? command.gateway.rttMilliseconds : nil
    }

    private func withFCMStandIn<Result: Sendable>(
        work: URL,
        _ body: (FCMStandIn?) async throws -> Result
    ) async throws -> Result {
        guard command.fcmDevices > 0 else { return try await body(nil) }
        return try await FCMStandIn.with(options: command.gateway, workDirectory: work) { try await body($0) }
    }

    private func serviceWatches(standIn: StandIn, fcm: FCMStandIn?) -> [ServiceWatch] {
        var watches: [ServiceWatch] = []
        if let controlPort = standIn.controlPort, command.devices > 0 {
            watches.append(
                ServiceWatch(service: .apns, devices: command.devices) {
                    let stats = try ControlAPI.stats(port: controlPort)
                    return stats.accepted + stats.rejected
                }
            )
        }
        if let fcm {
            watches.append(
                ServiceWatch(service: .fcm, devices: command.fcmDevices) {
                    let stats = try fcm.stats()
                    return stats.accepted + stats.rejected
                }
            )
        }
        return watches
    }

    private func runOnce(
        binary: String,
        database: String,
        keyPath: String,
        standIn: StandIn,
        fcm: FCMStandIn?
    ) async throws -> EndToEndRun {
        let options = command.gateway
        let gateway = try GatewayProcess.start(
            GatewayLaunch(
                binary: binary,
                databasePath: database,
                apnsHost: standIn.authority,
                caPath: standIn.caPath,
                authKeyPath: keyPath,
                topic: options.topic,
                extraArguments: (fcm?.gatewayArguments ?? []) + options.gatewayArguments
            )
        )
        var result = EndToEndRun(devices: command.devices + command.fcmDevices)
        do {
            let ports = try await gateway.waitForReady(timeout: 60)
            let sender = try DatagramSender()
            let datagram = Array(Self.datagram.utf8)

            let machineBefore = ProcessMetrics.machineCPU()
            let ownBefore = ProcessMetrics.selfCPU()
            let simulatorBefore = standIn.standInCPU()
            let fcmBefore = fcm?.cpu()
            let gatewayBefore = gateway.cpu()
            let start = ContinuousClock.now
            guard sender.send(datagram, port: ports.notification) else {
                throw BenchError("sendto failed for the notification datagram")
            }
            let connections = ConnectionSampler(port: standIn.port)
            defer { connections.stop() }

            let deadline = start + .seconds(options.timeout)
            result.take(
                try await ServiceWatch.poll(
                    serviceWatches(standIn: standIn, fcm: fcm),
                    start: start,
                    deadline: deadline,
                    interval: .milliseconds(command.pollMilliseconds),
                    checkAlive: { try gateway.checkAlive("during the broadcast") }
                )
            )
            let remaining = max(1, (deadline - ContinuousClock.now).seconds)
            if let done = try await gateway.waitForLines(
                containing: "notification request ",
                count: 1,
                timeout: remaining
            )?.first {
                result.secondsToDoneLine = (done.arrivedAt - start).seconds
                result.gatewayDuration = done.metadata("push.duration_s").flatMap(Double.init)
                result.gatewayAccepted = done.metadata("push.accepted").flatMap(Int.init)
                result.gatewayFailed = done.metadata("push.failed").flatMap(Int.init)
                if !done.text.hasSuffix("notification request done") {
                    result.incomplete = "the gateway logged: \(done.text)"
                }
            } else {
                result.incomplete =
                    (result.incomplete.map { $0 + "; " } ?? "")
                    + "no 'notification request done' line within \(options.timeout) s"
            }
            let gatewayAfter = gateway.cpu()
            let simulatorAfter = standIn.standInCPU()
            let fcmAfter = fcm?.cpu()
            let ownAfter = ProcessMetrics.selfCPU()
            let machineAfter = ProcessMetrics.machineCPU()
            result.gatewayPeakRSSBytes = gateway.peakRSS()
            result.connectionsToStandIn = connections.stop()
            if let before = gatewayBefore, let after = gatewayAfter { result.gatewayCPU = after - before }
            if let before = simulatorBefore, let after = simulatorAfter { result.simulatorCPU = after - before }
            let fcmCPU = fcmBefore.flatMap { before in fcmAfter.map { $0 - before } }
            if let before = machineBefore, let after = machineAfter {
                let ours =
                    (result.gatewayCPU?.total ?? 0) + (result.simulatorCPU?.total ?? 0) + (fcmCPU?.total ?? 0)
                    + (ownAfter - ownBefore).total
                result.otherMachineCPUSeconds = max(0, (after.busy - before.busy) - ours)
            }
            if let stats = standIn.stats() {
                result.simulatorAccepted = stats.accepted
                result.simulatorRejected = stats.rejected
                result.connectionsOpened = stats.connectionsOpened
            }
            recordCounters(&result, standIn: standIn, fcm: fcm, fcmCPU: fcmCPU)
        } catch {
            await gateway.stop()
            throw error
        }
        await gateway.stop()

        if !command.noH2Load && command.devices > 0 {
            if H2LoadBenchmark.isInstalled(command.h2loadPath) {
                let connections = command.h2loadConnections ?? max(1, result.connectionsToStandIn ?? 1)
                result.h2load = try await H2LoadBenchmark.run(
                    options: h2loadOptions(standIn: standIn),
                    connections: min(connections, command.devices),
                    target: BenchTarget(
                        host: standIn.host,
                        port: standIn.port,
                        caPath: standIn.caPath,
                        placement: standIn.processPID == nil ? .external : .process,
                        simulatorPID: standIn.processPID
                    )
                )
            }
        }
        return result
    }

    /// The streams per connection the gateway used: what the stand-in grants (the gateway takes what
    /// SETTINGS_MAX_CONCURRENT_STREAMS allows; an unknown stand-in is taken to grant APNs's 1,000),
    /// capped by the gateway's `--max-streams` when one was given.
    private func gatewayStreams(standIn: StandIn) -> Int {
        let granted = standIn.maxConcurrentStreams ?? 1_000
        guard let asked = command.gateway.gatewayArgument("--max-streams").flatMap(Int.init) else { return granted }
        return min(asked, granted)
    }

    /// What `H2LoadBenchmark` reads: the same count, topic and payload as the broadcast.
    private func h2loadOptions(standIn: StandIn) -> BenchOptions {
        let h2loadStreams = command.h2loadStreams ?? gatewayStreams(standIn: standIn)
        return BenchOptions(
            count: command.devices,
            connections: [1],
            inFlight: 1,
            batch: 1,
            streams: nil,
            clientThreads: 1,
            simulatorThreads: 1,
            maxConcurrentStreams: command.gateway.maxConcurrentStreams,
            simulatorProcess: true,
            pushgateBinaryOverride: nil,
            externalEndpoint: nil,
            ca: nil,
            topic: command.gateway.topic,
            warmup: 0,
            repetitions: 1,
            timeout: command.gateway.timeout,
            h2loadPath: command.h2loadPath,
            h2loadStreams: h2loadStreams,
            quietWait: 0,
            quietThreshold: 1
        )
    }

    private func printRun(_ run: EndToEndRun, index: Int) {
        var first = "run \(index)/\(command.runs): \(Format.integer(run.devices)) devices"
        if let seconds = run.secondsToSimulatorCount {
            first +=
                " in \(Format.milliseconds(seconds)) (simulator count; last poll below N at \(Format.milliseconds(run.secondsBeforeSimulatorCount ?? 0)))"
        }
        if let rate = run.notificationsPerSecond { first += " = \(Format.integer(rate)) notifications/s" }
        if let incomplete = run.incomplete { first += "; INCOMPLETE: \(incomplete)" }
        report.line(first)
        var done = "  gateway 'done' line read at \(run.secondsToDoneLine.map(Format.milliseconds) ?? "?")"
        done += "; its push.duration_s \(run.gatewayDuration.map { String(format: "%.3f", $0) } ?? "?")"
        done +=
            ", accepted \(run.gatewayAccepted.map(Format.integer) ?? "?"), failed \(run.gatewayFailed.map(Format.integer) ?? "?")"
        report.line(done)
        var cpu = "  gateway CPU: \(run.gatewayCPU.map(Format.cpu) ?? "?")"
        if let gatewayCPU = run.gatewayCPU {
            cpu += " = \(Format.micro(gatewayCPU.total / Double(run.devices) * 1e6)) µs/notification"
        }
        cpu += "; stand-in \(run.simulatorCPU.map { Format.seconds($0.total) + " s" } ?? "?")"
        if let other = run.otherMachineCPUSeconds { cpu += "; other CPU \(Format.seconds(other)) s" }
        report.line(cpu)
        for service in run.services { report.line(service.reportLine) }
        report.line(
            "  gateway peak RSS (VmHWM): \(Format.mebibytes(run.gatewayPeakRSSBytes)); "
                + "most connections open to the stand-in: \(run.connectionsToStandIn.map(String.init) ?? "?"); "
                + "simulator's connections_opened: \(run.connectionsOpened.map(String.init) ?? "-"); "
                + "simulator accepted \(run.simulatorAccepted.map(Format.integer) ?? "?"), "
                + "rejected \(run.simulatorRejected.map(Format.integer) ?? "?")"
        )
        if let h2load = run.h2load {
            var line = "  h2load -c \(h2load.connections) -m \(h2load.streamsPerConnection): "
            line += "\(Format.integer(h2load.requestsPerSecond)) req/s (\(Format.seconds(h2load.seconds)) s, "
            line += "2xx \(h2load.status2xx.map(Format.integer) ?? "?"))"
            if let rate = run.notificationsPerSecond {
                line += "; gateway / h2load = \(Format.ratio(rate / h2load.requestsPerSecond))"
            }
            report.line(line)
            var cpu = "  CPU: h2load \(Format.cpu(h2load.h2loadCPU))"
            cpu += " = \(Format.micro(h2load.microsecondsPerRequest)) µs/request"
            if let gateway = run.microsecondsPerNotification {
                cpu += "; gateway \(Format.micro(gateway)) µs/notification"
                cpu += " = \(Format.ratio(gateway / h2load.microsecondsPerRequest))x h2load's"
            }
            report.line(cpu)
        } else if !command.noH2Load {
            report.line(
                "  h2load: not installed at \(command.h2loadPath), skipped (Debian: apt-get install nghttp2-client)"
            )
        }
    }

    private func summary(_ runs: [EndToEndRun]) {
        report.line("")
        report.line("summary (\(runs.count) run(s), median (min-max)):")
        let complete = runs.filter { $0.incomplete == nil && $0.seconds != nil }
        if complete.count < runs.count { report.line("  \(runs.count - complete.count) run(s) INCOMPLETE, left out") }
        guard !complete.isEmpty else { return }
        let seconds = Spread(complete.compactMap(\.seconds))
        let rates = Spread(complete.compactMap(\.notificationsPerSecond))
        report.line(
            "  devices: \(Format.integer(command.devices + command.fcmDevices)) "
                + "(APNs \(Format.integer(command.devices)), FCM \(Format.integer(command.fcmDevices)))"
        )
        serviceSummary(complete)
        report.line(
            "  time to the last answer: \(Format.milliseconds(seconds.median)) "
                + "(\(Format.milliseconds(seconds.minimum))-\(Format.milliseconds(seconds.maximum)))"
        )
        report.line(
            "  notifications/s: \(Format.integer(rates.median)) (\(Format.integer(rates.minimum))-\(Format.integer(rates.maximum)))"
        )
        let user = Spread(complete.compactMap { $0.gatewayCPU?.user })
        let system = Spread(complete.compactMap { $0.gatewayCPU?.system })
        report.line(
            "  gateway CPU user \(Format.seconds(user.median)) s (\(Format.seconds(user.minimum))-\(Format.seconds(user.maximum))), sys \(Format.seconds(system.median)) s (\(Format.seconds(system.minimum))-\(Format.seconds(system.maximum)))"
        )
        report.line(
            "  gateway peak RSS: \(Format.mebibytes(complete.compactMap(\.gatewayPeakRSSBytes).max())) (largest)"
        )
        let connections = Set(complete.compactMap(\.connectionsToStandIn)).sorted().map(String.init)
            .joined(separator: ", ")
        report.line("  most connections open to the stand-in: \(connections.isEmpty ? "?" : connections)")
        let h2load = complete.compactMap(\.h2load)
        if !h2load.isEmpty {
            let h2loadRates = Spread(h2load.map(\.requestsPerSecond))
            let shapes = Set(h2load.map { "-c \($0.connections) -m \($0.streamsPerConnection)" }).sorted()
            report.line(
                "  h2load \(shapes.joined(separator: ", ")): \(Format.integer(h2loadRates.median)) req/s "
                    + "(\(Format.integer(h2loadRates.minimum))-\(Format.integer(h2loadRates.maximum)))"
            )
            report.line("  gateway / h2load: \(Format.ratio(rates.median / h2loadRates.median)) (ratio of the medians)")
            let h2loadCPU = Spread(h2load.map(\.microsecondsPerRequest))
            let gatewayCPU = Spread(complete.compactMap(\.microsecondsPerNotification))
            func spread(_ values: Spread) -> String {
                "\(Format.micro(values.median)) (\(Format.micro(values.minimum))-\(Format.micro(values.maximum)))"
            }
            report.line(
                "  CPU: gateway \(spread(gatewayCPU)) µs/notification, h2load \(spread(h2loadCPU)) µs/request: "
                    + "\(Format.ratio(gatewayCPU.median / h2loadCPU.median))x"
            )
        }
    }
}

/// The most ESTABLISHED connections to the stand-in's port seen during a broadcast, sampled every
/// 20 ms on its own task (the pool may close idle connections once the work is done).
final class ConnectionSampler: Sendable {
    private let peak = Atomic<Int>(0)
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(port: Int) {
        let sampler = Task.detached { [self] in
            while !Task.isCancelled {
                let now = ProcessMetrics.establishedConnections(toPort: port)
                if now > peak.load(ordering: .relaxed) { peak.store(now, ordering: .relaxed) }
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        task.withLock { $0 = sampler }
    }

    /// Stops sampling; returns the peak.
    @discardableResult
    func stop() -> Int {
        task.withLock { $0?.cancel() }
        return peak.load(ordering: .relaxed)
    }
}

/// Facts about where the benchmark's files live and how busy the machine is.
enum FileSystem {
    /// The file system type of the mount holding `path` (tmpfs makes fsync free).
    static func describe(_ path: String) -> String {
        guard let mounts = try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8) else {
            return "file system unknown"
        }
        var best: (mountPoint: String, type: String)? = nil
        for line in mounts.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 3 else { continue }
            let mountPoint = String(fields[1])
            let prefix = mountPoint.hasSuffix("/") ? mountPoint : mountPoint + "/"
            if path == mountPoint || path.hasPrefix(prefix), mountPoint.count >= (best?.mountPoint.count ?? 0) {
                best = (mountPoint, String(fields[2]))
            }
        }
        return best.map { "\($0.type) mounted at \($0.mountPoint)" } ?? "file system unknown"
    }

    static func loadAverage() -> String? {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return nil }
        return text.split(separator: " ").prefix(3).joined(separator: " ")
    }
}

extension Format {
    static func milliseconds(_ seconds: Double) -> String {
        seconds >= 1 ? String(format: "%.3f s", seconds) : String(format: "%.2f ms", seconds * 1_000)
    }
}
