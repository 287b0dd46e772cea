import ArgumentParser
import Foundation
import Synchronization

/// `pushgate-bench registrations`: a burst of registration datagrams, timed until every one is in
/// the store.
struct RegistrationsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registrations",
        abstract: "UDP registrations to the gateway (a child process), paced or a burst, timed until all are applied.",
        discussion: """
            Fills the store with --prefill devices first (direct SQL, random tokens), starts `pushgate \
            simulate` and `pushgate gateway` on it, sends --count registration datagrams (distinct \
            devices with random-looking tokens, one group) at --rate per second in slices of --slice \
            (--rate 0: one burst, as fast as this process can), and reads the store (the gateway's own \
            SQLite file, opened read-side) until the group holds them all. Reports the apply rate \
            over 1-second windows and the kernel's UDP receive-buffer drops.
            """
    )

    @OptionGroup var gateway: GatewayBenchOptions

    @Option(help: "Registration datagrams in the burst (distinct devices).")
    var count: Int = 100_000

    @Option(name: .customLong("poll-ms"), help: "How often the store is read, in milliseconds.")
    var pollMilliseconds: Int = 50

    @Option(help: "Give up when the count has not moved for this many seconds after the burst was sent.")
    var stall: Int = 10

    @Option(help: "Devices put in the store (another group) before the gateway starts, by direct SQL.")
    var prefill: Int = 0

    @Option(
        name: .customLong("prefill-cache"),
        help: """
            A prefilled database kept between runs: copied in when it exists, else made there by \
            --prefill first (delete it to refill; it is not checked against --prefill).
            """
    )
    var prefillCache: String?

    @Option(help: "Datagrams per second, sent in slices of --slice (0: one burst, back to back).")
    var rate: Int = 40_000

    @Option(help: "Datagrams per slice when paced.")
    var slice: Int = 1_000

    func validate() throws {
        guard count >= 1 else { throw ValidationError("--count must be at least 1") }
        guard (1...1_000).contains(pollMilliseconds) else { throw ValidationError("--poll-ms must be 1...1000") }
        guard stall >= 1 else { throw ValidationError("--stall must be at least 1") }
        guard prefill >= 0, rate >= 0 else { throw ValidationError("--prefill and --rate must be at least 0") }
        guard slice >= 1 else { throw ValidationError("--slice must be at least 1") }
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

        let pace =
            command.rate > 0
            ? "\(Format.integer(command.rate))/s in slices of \(Format.integer(command.slice))" : "one burst"
        report.line(
            "pushgate-bench registrations: \(Format.integer(command.count)) datagrams, distinct devices, "
                + "group \"\(Self.group)\", \(pace)"
        )
        report.line("  stand-in: \(StandIn.describe(options)) (only for the gateway to start)")
        report.line("  store: \(database) (\(FileSystem.describe(work.path)))")
        if let cache = command.prefillCache, FileManager.default.fileExists(atPath: cache) {
            try StoreFill.copy(cache, to: database)
            let bytes = (try? FileManager.default.attributesOfItem(atPath: database)[.size] as? Int) ?? nil
            report.line("  prefilled: a copy of \(cache) (--prefill-cache); file \(Format.mebibytes(bytes))")
        } else if command.prefill > 0 {
            let fill = try await StoreFill.prefill(path: database, devices: command.prefill, group: "prefilled")
            report.line(
                "  prefilled \(Format.integer(fill.created)) devices (random tokens, direct SQL) in "
                    + "\(Format.seconds(fill.seconds)) s; file \(Format.mebibytes(fill.bytes))"
            )
            if let cache = command.prefillCache {
                try StoreFill.copy(database, to: cache)
                report.line("  kept a copy as \(cache) (--prefill-cache)")
            }
        }
        report.line(
            "  machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(FileSystem.loadAverage() ?? "?") at start"
        )

        // Built before timing, so that the burst is only sendto(2) calls.
        let datagrams = (0..<command.count).map { index in
            Array(#"{"device":"\#(BenchDevices.randomLookingHex(index))","group":"\#(Self.group)"}"#.utf8)
        }
        try await StandIn.with(options: options, workDirectory: work, keyPath: keyPath) { standIn in
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
                try await measure(gateway: gateway, database: database, datagrams: datagrams)
            } catch {
                await gateway.stop()
                throw error
            }
            await gateway.stop()
            if let stopped = gateway.log.lines(containing: "UDP ingress stopped").last {
                report.line(
                    "  gateway at shutdown: udp.registrations_applied=\(stopped.metadata("udp.registrations_applied") ?? "?") (its own counter)"
                )
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
        let dropsBefore = ProcessMetrics.udpReceiveBufferErrors()
        let start = ContinuousClock.now
        let progress = SendProgress()
        let sending = Task.detached { [rate = command.rate, slice = command.slice, port = ports.registration] in
            await progress.send(datagrams, with: sender, port: port, rate: rate, slice: slice, from: start)
        }
        var samples: [(at: ContinuousClock.Instant, applied: Int)] = []
        var largestBacklog = 0

        var applied = 0
        var appliedAt: ContinuousClock.Instant? = nil
        var lastChange = ContinuousClock.now
        let deadline = start + .seconds(options.timeout)
        while ContinuousClock.now < deadline {
            let polledAt = ContinuousClock.now
            let count = try await counter.count()
            samples.append((polledAt, count))
            largestBacklog = max(largestBacklog, progress.sent - count)
            if count != applied {
                applied = count
                lastChange = polledAt
            }
            if applied >= datagrams.count {
                appliedAt = polledAt
                break
            }
            if (polledAt - lastChange) > .seconds(command.stall), progress.finishedAt != nil { break }
            try gateway.checkAlive("during the burst")
            try await Task.sleep(for: .milliseconds(command.pollMilliseconds))
        }
        let end = appliedAt ?? lastChange
        _ = await sending.value
        let sent = progress.finishedAt ?? ContinuousClock.now
        let refused = progress.refused
        let dropsAfter = ProcessMetrics.udpReceiveBufferErrors()
        let gatewayAfter = gateway.cpu()
        let ownAfter = ProcessMetrics.selfCPU()
        let machineAfter = ProcessMetrics.machineCPU()

        let seconds = (end - start).seconds
        report.line(
            "sent \(Format.integer(datagrams.count - refused)) datagrams in \(Format.milliseconds((sent - start).seconds))\(refused > 0 ? " (\(refused) refused by sendto)" : "")"
        )
        var line = "applied \(Format.integer(applied)) of \(Format.integer(datagrams.count))"
        if appliedAt != nil {
            line +=
                " in \(Format.milliseconds(seconds)) from the first datagram = \(Format.integer(Double(applied) / seconds))/s"
        } else {
            line +=
                "; INCOMPLETE: the count stopped moving at \(Format.milliseconds(seconds)) (datagrams lost, or rejected: see the gateway's warnings above)"
        }
        report.line(line)
        let windows = Self.windowRates(samples, from: start, until: end)
        if !windows.isEmpty {
            let spread = Spread(windows)
            report.line(
                "  apply rate over \(windows.count) whole 1-s windows: median \(Format.integer(spread.median))/s "
                    + "(\(Format.integer(spread.minimum))-\(Format.integer(spread.maximum))); "
                    + "largest backlog (sent - applied) \(Format.integer(largestBacklog))"
            )
        }
        if let dropsBefore, let dropsAfter {
            report.line(
                "  kernel UDP receive-buffer drops (/proc/net/snmp RcvbufErrors, whole machine): "
                    + Format.integer(dropsAfter - dropsBefore)
            )
        }
        var gatewayCPU: CPUTime? = nil
        if let gatewayBefore, let gatewayAfter { gatewayCPU = gatewayAfter - gatewayBefore }
        var cpu = "  gateway CPU: \(gatewayCPU.map(Format.cpu) ?? "?")"
        if let gatewayCPU {
            cpu += " = \(Format.micro(gatewayCPU.total / Double(max(1, applied)) * 1e6)) µs/registration"
        }
        if let before = machineBefore, let after = machineAfter, let gatewayCPU {
            let ours = gatewayCPU.total + (ownAfter - ownBefore).total
            cpu +=
                "; bench (sender + store reads) \(Format.seconds((ownAfter - ownBefore).total)) s; other CPU \(Format.seconds(max(0, (after.busy - before.busy) - ours))) s"
        }
        report.line(cpu)
        report.line("  gateway peak RSS (VmHWM): \(Format.mebibytes(gateway.peakRSS()))")
    }

    /// Applied per second in each whole second from `start` to `end`, interpolating the count at
    /// each second's boundary from the polls around it.
    static func windowRates(
        _ samples: [(at: ContinuousClock.Instant, applied: Int)],
        from start: ContinuousClock.Instant,
        until end: ContinuousClock.Instant
    ) -> [Double] {
        guard samples.count >= 2 else { return [] }
        func count(at instant: ContinuousClock.Instant) -> Double {
            guard let after = samples.firstIndex(where: { $0.at >= instant }) else {
                return Double(samples.last!.applied)
            }
            guard after > 0 else { return Double(samples[0].applied) }
            let (a, b) = (samples[after - 1], samples[after])
            let span = (b.at - a.at).seconds
            let fraction = span > 0 ? (instant - a.at).seconds / span : 1
            return Double(a.applied) + fraction * Double(b.applied - a.applied)
        }
        let whole = Int((end - start).seconds)
        return (0..<whole).map { second in
            count(at: start + .seconds(second + 1)) - count(at: start + .seconds(second))
        }
    }
}

/// The sending side of a registration run, on its own task, with what it has sent so far readable
/// by the poller.
final class SendProgress: Sendable {
    private let sentCount = Atomic<Int>(0)
    private let refusedCount = Atomic<Int>(0)
    private let finished = Mutex<ContinuousClock.Instant?>(nil)

    var sent: Int { sentCount.load(ordering: .relaxed) }
    var refused: Int { refusedCount.load(ordering: .relaxed) }
    var finishedAt: ContinuousClock.Instant? { finished.withLock { $0 } }

    /// Slice k goes at `start + k * slice / rate` (rate 0: everything at once).
    func send(
        _ datagrams: [[UInt8]],
        with sender: DatagramSender,
        port: Int,
        rate: Int,
        slice: Int,
        from start: ContinuousClock.Instant
    ) async {
        var next = 0
        var sliceIndex = 0
        while next < datagrams.count {
            let end = rate > 0 ? min(datagrams.count, next + slice) : datagrams.count
            if rate > 0 {
                let due = start + .nanoseconds(Int64(sliceIndex) * Int64(slice) * 1_000_000_000 / Int64(rate))
                try? await Task.sleep(until: due, clock: .continuous)
            }
            for index in next..<end where !sender.send(datagrams[index], port: port) {
                refusedCount.add(1, ordering: .relaxed)
            }
            sentCount.store(end, ordering: .relaxed)
            next = end
            sliceIndex += 1
        }
        let now = ContinuousClock.now
        finished.withLock { $0 = now }
    }
}
