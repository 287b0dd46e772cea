import ArgumentParser
import Foundation

/// `pushgate-bench twoapps`: two apps broadcasting at once, each to its own group; when each finishes
/// (issue #23: one app's broadcast must not slow another's).
struct TwoAppsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "twoapps",
        abstract: "Two apps broadcasting at once: the time each takes, and how far apart they finish.",
        discussion: """
            The gateway is configured with two apps (a and b, a configuration file: each its own APNs \
            client and pool, both against one haproxy stand-in holding every answer --rtt-ms, default 50). \
            Each app has a group of --devices devices in a fresh copy of the same store; the two broadcast \
            datagrams leave back to back (a first, then b; --b-first swaps them), and each app's time is its \
            datagram → its 'done' line. Prints both, and the later one's excess over the earlier in %.
            """
    )

    @OptionGroup var gateway: GatewayBenchOptions

    @Option(help: "Devices of each app's broadcast.")
    var devices: Int = 500_000

    @Option(help: "Runs (each with a fresh store, stand-in and gateway).")
    var runs: Int = 1

    @Flag(name: .customLong("b-first"), help: "Send app b's broadcast before app a's.")
    var bFirst = false

    func validate() throws {
        guard (1...25_000_000).contains(devices) else { throw ValidationError("--devices must be 1...25000000") }
        guard (1...20).contains(runs) else { throw ValidationError("--runs must be 1...20") }
        if gateway.apnsHost != nil {
            throw ValidationError(
                "twoapps configures its apps against its own haproxy stand-in: it excludes --apns-host"
            )
        }
    }

    func run() async throws {
        ChildProcesses.installSignalHandlers()
        let report = Report(json: false)
        do {
            try await TwoAppsBenchmark(command: self, report: report).run()
        } catch let error as BenchError {
            report.line("pushgate-bench twoapps: \(error.description)")
            throw ExitCode.failure
        }
    }
}

/// One run of `twoapps`.
struct TwoAppsRun: Sendable {
    /// Datagram → the app's done line, per app.
    var seconds: [String: Double] = [:]
    var accepted: [String: Int] = [:]
    var gatewayCPU: CPUTime?
    var otherMachineCPUSeconds: Double?
    var gatewayPeakRSSBytes: Int?
    var incomplete: String?
}

struct TwoAppsBenchmark {
    static let apps = ["a", "b"]
    static let group = "bench"
    static let warmGroup = "warm"

    let command: TwoAppsCommand
    let report: Report

    static func broadcast(app: String) -> [UInt8] {
        Array(#"{"app":"\#(app)","groups":["\#(group)"],"payload":{"aps":{"alert":"broadcast \#(app)"}}}"#.utf8)
    }

    private var rtt: Int { command.gateway.rttMilliseconds ?? HeadOfLineCommand.defaultRTTMilliseconds }
    private var order: [String] { command.bFirst ? Self.apps.reversed() : Self.apps }

    func run() async throws {
        let options = command.gateway
        let binary = try options.binary()
        let work = try options.makeWorkDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let key = try ThrowawayKey.make()
        let keyPath = try key.write(in: work)

        report.line(
            "pushgate-bench twoapps: apps \(Self.apps.joined(separator: " and ")) broadcasting \(Format.integer(command.devices)) devices each at once "
                + "(\(order.joined(separator: " then "))), answers held \(rtt) ms"
        )
        report.line(
            "  gateway: \(binary) gateway -f -d <copy of the filled store> -l 127.0.0.1 -g 0 -n 0 --http-port=-1 --config <two apps> \(options.gatewayArguments.joined(separator: " "))"
        )
        report.line(
            "  stand-in: haproxy, 1 thread (\(HAProxyStandIn.scriptPath)): 200, a fresh apns-id, every answer held \(rtt) ms"
        )
        for app in order { report.line("  \(app): \(String(decoding: Self.broadcast(app: app), as: UTF8.self))") }
        report.line("  store: \(work.path) (\(FileSystem.describe(work.path)))")
        report.line(
            "  machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(FileSystem.loadAverage() ?? "?") at start"
        )

        let template = work.appendingPathComponent("filled.db").path
        var fillSeconds = 0.0
        for app in Self.apps {
            let filled = try await StoreFill.prefill(
                path: template,
                app: app,
                devices: command.devices,
                group: Self.group
            )
            let warm = try await StoreFill.prefill(path: template, app: app, devices: 1, group: Self.warmGroup)
            fillSeconds += filled.seconds + warm.seconds
        }
        report.line(
            "fill: \(Format.integer(command.devices)) devices in group \(Self.group) of each app, and one in \(Self.warmGroup), in \(Format.seconds(fillSeconds)) s"
        )

        var runs: [TwoAppsRun] = []
        for index in 1...command.runs {
            await options.waitForQuietMachine(report: report)
            let database = work.appendingPathComponent("run.db").path
            try StoreFill.copy(template, to: database)
            let run = try await runOnce(binary: binary, database: database, keyPath: keyPath, work: work)
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database + suffix) }
            printRun(index: index, run)
            runs.append(run)
        }
        summary(runs)
    }

    private func runOnce(binary: String, database: String, keyPath: String, work: URL) async throws -> TwoAppsRun {
        try await HAProxyStandIn.with(scriptOverride: command.gateway.standInScript, rttMilliseconds: rtt) {
            haproxy in
            try await measure(binary: binary, database: database, keyPath: keyPath, work: work, haproxy: haproxy)
        }
    }

    private func measure(
        binary: String,
        database: String,
        keyPath: String,
        work: URL,
        haproxy: HAProxyStandIn
    ) async throws -> TwoAppsRun {
        let options = command.gateway
        var launch = GatewayLaunch(
            binary: binary,
            databasePath: database,
            standIn: haproxy,
            authKeyPath: keyPath,
            options: options
        )
        let configurationPath = work.appendingPathComponent("two-apps.yaml").path
        try Data(launch.configuration(apps: Self.apps).utf8).write(to: URL(fileURLWithPath: configurationPath))
        launch.configurationPath = configurationPath
        let gateway = try GatewayProcess.start(launch)
        var run = TwoAppsRun()
        do {
            let ports = try await gateway.waitForReady(timeout: 60)
            let sender = try DatagramSender()
            // Warm-up: one notification per app opens each app's first APNs connection.
            for app in Self.apps {
                let warmup = Array(
                    #"{"app":"\#(app)","groups":["\#(Self.warmGroup)"],"payload":{"aps":{"alert":"warm-up"}}}"#.utf8
                )
                guard sender.send(warmup, port: ports.notification) else { throw BenchError("sendto failed") }
            }
            guard
                try await gateway.waitForLines(
                    containing: "notification request done",
                    count: Self.apps.count,
                    timeout: 60
                )
                    != nil
            else { throw BenchError("the warm-up requests were not done within 60 s") }

            let machineBefore = ProcessMetrics.machineCPU()
            let gatewayBefore = gateway.cpu()
            let standInBefore = ProcessMetrics.processCPU(pid: haproxy.pid)
            let ownBefore = ProcessMetrics.selfCPU()
            var sentAt: [String: ContinuousClock.Instant] = [:]
            for app in order {
                sentAt[app] = .now
                guard sender.send(Self.broadcast(app: app), port: ports.notification) else {
                    throw BenchError("sendto failed for app \(app)'s broadcast")
                }
            }
            let targets = String(command.devices)
            let deadline = ContinuousClock.now + .seconds(options.timeout)
            var done: [String: GatewayLogLine] = [:]
            while done.count < Self.apps.count, ContinuousClock.now < deadline {
                for line in gateway.log.lines(containing: "notification request ")
                where line.metadata("push.targets") == targets {
                    if let app = line.metadata("push.app"), done[app] == nil { done[app] = line }
                }
                if done.count < Self.apps.count {
                    try gateway.checkAlive("during the broadcasts")
                    try await Task.sleep(for: .milliseconds(5))
                }
            }
            let gatewayAfter = gateway.cpu()
            let standInAfter = ProcessMetrics.processCPU(pid: haproxy.pid)
            let ownAfter = ProcessMetrics.selfCPU()
            let machineAfter = ProcessMetrics.machineCPU()
            for app in Self.apps {
                guard let line = done[app], let sent = sentAt[app] else { continue }
                run.seconds[app] = (line.arrivedAt - sent).seconds
                run.accepted[app] = line.metadata("push.accepted").flatMap(Int.init)
                if !line.text.hasSuffix("notification request done") {
                    run.incomplete = "app \(app): the gateway logged: \(line.text)"
                }
            }
            if done.count < Self.apps.count {
                let missing = Self.apps.filter { done[$0] == nil }.joined(separator: ", ")
                run.incomplete = "no done line for app \(missing) within \(options.timeout) s"
                // What the gateway was doing when the bench gave up (its log is not kept otherwise).
                report.line("  the gateway's last lines:")
                for line in gateway.log.recent { report.line("    \(line)") }
            }
            if let before = gatewayBefore, let after = gatewayAfter { run.gatewayCPU = after - before }
            if let before = machineBefore, let after = machineAfter {
                let standIn = standInBefore.flatMap { before in standInAfter.map { ($0 - before).total } } ?? 0
                let ours = (run.gatewayCPU?.total ?? 0) + standIn + (ownAfter - ownBefore).total
                run.otherMachineCPUSeconds = max(0, (after.busy - before.busy) - ours)
            }
            run.gatewayPeakRSSBytes = gateway.peakRSS()
        } catch {
            await gateway.stop()
            throw error
        }
        await gateway.stop()
        return run
    }

    /// The later app's time over the earlier's, in % (nil unless both finished).
    static func spread(_ run: TwoAppsRun) -> Double? {
        let times = apps.compactMap { run.seconds[$0] }
        guard times.count == apps.count, let low = times.min(), let high = times.max(), low > 0 else { return nil }
        return (high / low - 1) * 100
    }

    private func printRun(index: Int, _ run: TwoAppsRun) {
        var line = "run \(index):"
        for app in Self.apps {
            line += " \(app) \(run.seconds[app].map(Format.milliseconds) ?? "?")"
            line += " (accepted \(run.accepted[app].map(Format.integer) ?? "?"))"
        }
        if let spread = Self.spread(run) { line += String(format: "; the later %+.1f %% of the earlier", spread) }
        if let incomplete = run.incomplete { line += "; INCOMPLETE: \(incomplete)" }
        report.line(line)
        var cpu = "  gateway CPU: \(run.gatewayCPU.map(Format.cpu) ?? "?")"
        if let gatewayCPU = run.gatewayCPU {
            let notifications = command.devices * Self.apps.count
            cpu += " = \(Format.micro(gatewayCPU.total / Double(notifications) * 1e6)) µs/notification"
        }
        if let other = run.otherMachineCPUSeconds { cpu += "; other CPU \(Format.seconds(other)) s" }
        cpu += "; peak RSS \(Format.mebibytes(run.gatewayPeakRSSBytes))"
        report.line(cpu)
    }

    private func summary(_ runs: [TwoAppsRun]) {
        report.line("")
        report.line(
            "summary (twoapps, \(Format.integer(command.devices)) devices each, answers held \(rtt) ms, load average \(FileSystem.loadAverage() ?? "?") at the end):"
        )
        for (index, run) in runs.enumerated() {
            let both = Self.apps.map { "\($0) \(run.seconds[$0].map(Format.milliseconds) ?? "?")" }.joined(
                separator: ", "
            )
            let spread = Self.spread(run).map { String(format: "%+.1f %%", $0) } ?? "?"
            report.line("  run \(index + 1): \(both); apart \(spread)")
        }
    }
}
