import ArgumentParser
import Foundation

/// `pushgate-bench registrations`: a burst of registration datagrams, timed until every one is in
/// the store.
struct RegistrationsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registrations",
        abstract: "A burst of UDP registrations to the gateway (a child process), timed until all are applied.",
        discussion: """
            Starts `pushgate simulate` and `pushgate gateway` on a fresh store, sends --count registration \
            datagrams (distinct devices, one group) as fast as this process can, and reads the store \
            (the gateway's own SQLite file, opened read-side) until the group holds them all.
            """
    )

    @OptionGroup var gateway: GatewayBenchOptions

    @Option(help: "Registration datagrams in the burst (distinct devices).")
    var count: Int = 100_000

    @Option(name: .customLong("poll-ms"), help: "How often the store is read, in milliseconds.")
    var pollMilliseconds: Int = 10

    @Option(help: "Give up when the count has not moved for this many seconds after the burst was sent.")
    var stall: Int = 10

    func validate() throws {
        guard count >= 1 else { throw ValidationError("--count must be at least 1") }
        guard (1...1_000).contains(pollMilliseconds) else { throw ValidationError("--poll-ms must be 1...1000") }
        guard stall >= 1 else { throw ValidationError("--stall must be at least 1") }
    }

    func run() async throws {
        ChildProcesses.installSignalHandlers()
        let report = Report(json: false)
        do {
            try await RegistrationBenchmark(command: self, report: report).run()
        } catch let error as BenchError {
            report.line("pushgate-bench registrations: \(error.description)")
            throw ExitCode.failure
        }
    }
}

struct RegistrationBenchmark {
    static let group = "burst"

    let command: RegistrationsCommand
    let report: Report

    func run() async throws {
        let options = command.gateway
        let binary = try options.binary()
        let work = try options.makeWorkDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let keyPath = try ThrowawayKey.make().write(in: work)
        let database = work.appendingPathComponent("registrations.db").path

        report.line("pushgate-bench registrations: \(Format.integer(command.count)) datagrams, distinct devices, group \"\(Self.group)\"")
        report.line("  stand-in: \(StandIn.describe(options)) (only for the gateway to start)")
        report.line("  store: \(database) (\(FileSystem.describe(work.path))), fresh")
        report.line("  machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(FileSystem.loadAverage() ?? "?") at start")

        // Built before timing, so that the burst is only sendto(2) calls.
        let datagrams = (0..<command.count).map { index in
            Array(#"{"device":"\#(BenchDevices.tokenHex(index))","group":"\#(Self.group)"}"#.utf8)
        }
        try await StandIn.with(options: options, workDirectory: work, keyPath: keyPath) { standIn in
            let gateway = try GatewayProcess.start(
                GatewayLaunch(
                    binary: binary, databasePath: database, apnsHost: standIn.authority, caPath: standIn.caPath,
                    authKeyPath: keyPath, topic: options.topic, extraArguments: options.gatewayArguments))
            do {
                try await measure(gateway: gateway, database: database, datagrams: datagrams)
            } catch {
                await gateway.stop()
                throw error
            }
            await gateway.stop()
            if let stopped = gateway.log.lines(containing: "UDP ingress stopped").last {
                report.line(
                    "  gateway at shutdown: udp.registrations_applied=\(stopped.metadata("udp.registrations_applied") ?? "?") (its own counter)")
            }
        }
    }

    private func measure(gateway: GatewayProcess, database: String, datagrams: [[UInt8]]) async throws {
        let options = command.gateway
        let ports = try await gateway.waitForReady(timeout: 60)
        let counter = try GroupCounter(path: database, group: Self.group)
        defer { counter.close() }
        let sender = try DatagramSender()
        await options.waitForQuietMachine(report: report)

        let machineBefore = ProcessMetrics.machineCPU()
        let ownBefore = ProcessMetrics.selfCPU()
        let gatewayBefore = gateway.cpu()
        let start = ContinuousClock.now
        var refused = 0
        for datagram in datagrams where !sender.send(datagram, port: ports.registration) { refused += 1 }
        let sent = ContinuousClock.now

        var applied = 0
        var appliedAt: ContinuousClock.Instant? = nil
        var lastChange = ContinuousClock.now
        let deadline = start + .seconds(options.timeout)
        while ContinuousClock.now < deadline {
            let polledAt = ContinuousClock.now
            let count = try await counter.count()
            if count != applied {
                applied = count
                lastChange = polledAt
            }
            if applied >= datagrams.count {
                appliedAt = polledAt
                break
            }
            if (polledAt - lastChange) > .seconds(command.stall) { break }
            try gateway.checkAlive("during the burst")
            try await Task.sleep(for: .milliseconds(command.pollMilliseconds))
        }
        let end = appliedAt ?? lastChange
        let gatewayAfter = gateway.cpu()
        let ownAfter = ProcessMetrics.selfCPU()
        let machineAfter = ProcessMetrics.machineCPU()

        let seconds = (end - start).seconds
        report.line(
            "sent \(Format.integer(datagrams.count - refused)) datagrams in \(Format.milliseconds((sent - start).seconds))\(refused > 0 ? " (\(refused) refused by sendto)" : "")"
        )
        var line = "applied \(Format.integer(applied)) of \(Format.integer(datagrams.count))"
        if appliedAt != nil {
            line += " in \(Format.milliseconds(seconds)) from the first datagram = \(Format.integer(Double(applied) / seconds))/s"
        } else {
            line += "; INCOMPLETE: the count stopped moving at \(Format.milliseconds(seconds)) (datagrams lost, or rejected: see the gateway's warnings above)"
        }
        report.line(line)
        var gatewayCPU: CPUTime? = nil
        if let gatewayBefore, let gatewayAfter { gatewayCPU = gatewayAfter - gatewayBefore }
        var cpu = "  gateway CPU: \(gatewayCPU.map(Format.cpu) ?? "?")"
        if let gatewayCPU { cpu += " = \(Format.micro(gatewayCPU.total / Double(max(1, applied)) * 1e6)) µs/registration" }
        if let before = machineBefore, let after = machineAfter, let gatewayCPU {
            let ours = gatewayCPU.total + (ownAfter - ownBefore).total
            cpu += "; bench (sender + store reads) \(Format.seconds((ownAfter - ownBefore).total)) s; other CPU \(Format.seconds(max(0, (after.busy - before.busy) - ours))) s"
        }
        report.line(cpu)
        report.line("  gateway peak RSS (VmHWM): \(Format.mebibytes(gateway.peakRSS()))")
    }
}
