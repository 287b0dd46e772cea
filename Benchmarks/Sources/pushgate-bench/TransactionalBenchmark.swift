import ArgumentParser
import Foundation

/// `pushgate-bench transactional`: a stream of one-device requests, paced open-loop, over UDP or the
/// HTTP API (issue #23).
struct TransactionalCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transactional",
        abstract:
            "One-device requests at a fixed rate through the gateway (a child process): kept up or not, latency, CPU.",
        discussion: """
            Registers --devices devices, each alone in its own group, then sends --rate one-device \
            requests a second for --seconds, paced open-loop (the sender never waits for the gateway; \
            when it is late itself, it says how late), as UDP datagrams or, with --http, as POST \
            /v1/notifications from --clients HTTP/1.1 keep-alive connections. The stand-in is haproxy \
            (scripts/haproxy-apns-standin.sh, answering at once or after --rtt-ms) logging the receipt \
            time of every request with the sequence number in its payload, so each request's latency is \
            send → stand-in receipt.
            """
    )

    @OptionGroup var gateway: GatewayBenchOptions

    @Option(help: "Requests a second.")
    var rate: Int = 250

    @Option(help: "Seconds of sending.")
    var seconds: Double = 10

    @Option(help: "Devices, each alone in its own group; request i goes to device i mod --devices.")
    var devices: Int = 2_500

    @Flag(help: "Send through POST /v1/notifications instead of UDP datagrams.")
    var http = false

    @Option(help: "With --http: concurrent HTTP/1.1 keep-alive connections.")
    var clients: Int = 32

    @Option(help: "Requests sent and answered before timing (they open the APNs connection).")
    var warmup: Int = 10

    @Option(
        help: ArgumentHelp(
            "Store in PostgreSQL: the server's URL (postgres://user:password@host:port/database).",
            discussion: "Each run works in a fresh schema; the figures add the CPU of the server at the URL's port."
        )
    )
    var postgres: String?

    @Flag(
        help: """
            With --http: after the run, h2load --h1 (a C client) offers the same rate from the same number of \
            keep-alive connections to the same gateway for --seconds (one fixed body: a warm-up request's).
            """
    )
    var h2load = false

    @Option(help: "The h2load binary (with --h2load).")
    var h2loadPath = "/usr/bin/h2load"

    @Option(
        help: ArgumentHelp(
            "With --h2load: requests h2load pipelines on each connection (its -m; 1: one in flight, as our clients).",
            discussion: "HTTP/1.1 pipelining: each connection writes its next requests before the answers come back."
        )
    )
    var h2loadPipeline: Int = 1

    func validate() throws {
        guard (1...1_000_000).contains(rate) else { throw ValidationError("--rate must be 1...1000000") }
        guard seconds > 0, seconds <= 3_600 else { throw ValidationError("--seconds must be in (0, 3600]") }
        guard (1...10_000_000).contains(devices) else { throw ValidationError("--devices must be 1...10000000") }
        guard (1...1_024).contains(clients) else { throw ValidationError("--clients must be 1...1024") }
        guard (1...1_000).contains(warmup) else { throw ValidationError("--warmup must be 1...1000") }
        guard Int((Double(rate) * seconds).rounded(.down)) >= 1 else {
            throw ValidationError("--rate x --seconds must be at least one request")
        }
        if gateway.apnsHost != nil {
            throw ValidationError("transactional times receipts at its own haproxy stand-in: it excludes --apns-host")
        }
        if !http && clients != 32 { throw ValidationError("--clients applies with --http only") }
        if !http && h2load { throw ValidationError("--h2load applies with --http only") }
        guard (1...256).contains(h2loadPipeline) else { throw ValidationError("--h2load-pipeline must be 1...256") }
        if !h2load && h2loadPipeline != 1 { throw ValidationError("--h2load-pipeline applies with --h2load only") }
    }

    var total: Int { Int((Double(rate) * seconds).rounded(.down)) }

    func run() async throws {
        ChildProcesses.installSignalHandlers()
        let report = Report(json: false)
        do {
            try await TransactionalBenchmark(command: self, report: report).run()
        } catch let error as BenchError {
            report.line("pushgate-bench transactional: \(error.description)")
            throw ExitCode.failure
        }
    }
}

/// The figures of one `transactional` run.
struct TransactionalRun: Sendable {
    var sent = 0
    var failedSends = 0
    var senderSeconds = 0.0
    var lateness = SendLateness()
    /// HTTP only.
    var accepted: Int?
    var otherStatuses: [Int: Int] = [:]
    var clientErrors: [String] = []
    /// HTTP only: CPU of the client threads.
    var clientCPUSeconds: Double?
    /// HTTP only: each request's round trip at its client (written → answer read).
    var roundTrips: [Double] = []
    /// The gateway's CPU and context switches from the first send to the last answer to a client (HTTP) or
    /// the last datagram sent (UDP): what accepting cost, with whatever delivery ran meanwhile.
    var sendingGatewayCPU: CPUTime?
    var sendingContextSwitches: Int?
    /// The gateway's context switches over the whole run (to its last done line).
    var contextSwitches: Int?
    /// HTTP with --h2load: h2load's run against the same gateway after this one.
    var h2load: TransactionalH2Load?
    var tally = TrafficTally(capacity: 0)
    var doneLines = 0
    /// `RcvbufErrors` over the run, machine-wide (UDP datagrams the kernel dropped for a full buffer).
    var kernelDrops: Int?
    var gatewayCPU: CPUTime?
    /// With `--postgres`: the server's processes.
    var postgresCPU: CPUTime?
    var standInCPU: CPUTime?
    var otherMachineCPUSeconds: Double?
    var gatewayPeakRSSBytes: Int?
    var incomplete: String?

    var cpuPerRequestSeconds: Double? {
        guard let gatewayCPU, sent > 0 else { return nil }
        return gatewayCPU.total / Double(sent)
    }
}

struct TransactionalBenchmark {
    static let groupPrefix = "t"

    let command: TransactionalCommand
    let report: Report

    /// Request `index` (its sequence number) to device `index mod devices`, urgent (APNs priority 10):
    /// the same JSON as a UDP datagram and as an HTTP body.
    static func body(index: Int, devices: Int) -> [UInt8] {
        let group = "\(groupPrefix)\(index % devices)"
        let payload = #"{"aps":{"alert":"transactional"},"\#(BenchSequence.key)":\#(index)}"#
        return Array(#"{"groups":["\#(group)"],"type":"urgent","payload":\#(payload)}"#.utf8)
    }

    /// A warm-up request: no sequence number, so the stand-in does not log it.
    static func warmupBody(index: Int, devices: Int) -> [UInt8] {
        Array(
            #"{"groups":["\#(groupPrefix)\#(index % devices)"],"type":"urgent","payload":{"aps":{"alert":"warm-up"}}}"#
                .utf8
        )
    }

    func run() async throws {
        let options = command.gateway
        let binary = try options.binary()
        let work = try options.makeWorkDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let key = try ThrowawayKey.make()
        let keyPath = try key.write(in: work)
        let rtt = options.rttMilliseconds ?? 0
        let via =
            command.http ? "POST /v1/notifications from \(command.clients) HTTP/1.1 keep-alive connections" : "UDP"

        report.line(
            "pushgate-bench transactional: \(Format.integer(command.total)) one-device requests over \(via), "
                + "\(Format.integer(command.rate))/s for \(command.seconds) s (paced, open loop), "
                + "\(Format.integer(command.devices)) devices each alone in its group"
        )
        report.line(
            "  gateway: \(binary) gateway -f \(command.postgres == nil ? "-d DB" : "--store URL") -l 127.0.0.1 -g 0 -n 0 --http-port=\(command.http ? 0 : -1) --apns-host … \(options.gatewayArguments.joined(separator: " "))"
        )
        report.line(
            "  stand-in: haproxy, 1 thread (\(HAProxyStandIn.scriptPath)): 200, a fresh apns-id, every answer held \(rtt) ms; logs each request's receipt time (µs) and body to this process over UDP"
        )
        if command.http {
            report.line(
                "  client: this process, \(command.clients) threads, each one blocking HTTP/1.1 keep-alive connection (h2load cannot vary the body per request)"
            )
        }
        report.line("  request: \(String(decoding: Self.body(index: 7, devices: command.devices), as: UTF8.self))")
        report.line("  store: \(work.path) (\(FileSystem.describe(work.path)))")
        report.line(
            "  machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(FileSystem.loadAverage() ?? "?") at start"
        )

        let database = work.appendingPathComponent("transactional.db").path
        let postgres = try command.postgres.map(PostgresBenchStore.init(server:))
        let fill: StoreFill.Result
        if let postgres {
            report.line("  store: PostgreSQL \(postgres.redacted) (--store; replaces the SQLite file)")
            fill = try await postgres.fillSingles(count: command.devices, prefix: Self.groupPrefix)
        } else {
            fill = try await StoreFill.fillSingles(path: database, count: command.devices, prefix: Self.groupPrefix)
        }
        report.line(
            "fill: \(Format.integer(fill.devices)) devices in \(Format.integer(fill.devices)) groups in \(Format.seconds(fill.seconds)) s (\(postgres == nil ? "SQLiteStore" : "PostgresStore").register(batch:))"
        )

        let listener = try ReceiptListener()
        defer { listener.stop() }
        let haproxy = try await HAProxyStandIn.start(
            script: try HAProxyStandIn.locateScript(override: options.standInScript),
            rttMilliseconds: rtt,
            logAddress: listener.address
        )
        let result: TransactionalRun
        do {
            result = try await measure(
                binary: binary,
                database: database,
                postgres: postgres,
                keyPath: keyPath,
                haproxy: haproxy,
                listener: listener
            )
        } catch {
            await haproxy.stop()
            throw error
        }
        await haproxy.stop()
        if listener.unreadable.load(ordering: .relaxed) > 0 {
            report.line(
                "note: \(listener.unreadable.load(ordering: .relaxed)) datagrams from the stand-in were no receipt line"
            )
        }
        summary(result)
    }

    private func measure(
        binary: String,
        database: String,
        postgres: PostgresBenchStore?,
        keyPath: String,
        haproxy: HAProxyStandIn,
        listener: ReceiptListener
    ) async throws -> TransactionalRun {
        let options = command.gateway
        let gateway = try GatewayProcess.start(
            GatewayLaunch(
                binary: binary,
                databasePath: database,
                apnsHost: "\(haproxy.host):\(haproxy.port)",
                caPath: haproxy.caPath,
                authKeyPath: keyPath,
                topic: options.topic,
                httpPort: command.http ? 0 : -1,
                extraArguments: options.gatewayArguments,
                storeURL: postgres?.url
            )
        )
        var run = TransactionalRun()
        do {
            let ports = try await gateway.waitForReady(timeout: 60)
            let sender = try DatagramSender()
            let devices = command.devices
            let http = command.http
            var warmupConnection: HTTPConnection? = nil
            if http {
                guard let port = ports.http else { throw BenchError("the gateway's ready line names no http.port") }
                warmupConnection = try HTTPConnection(port: port)
            }
            // Warm-up: opens the APNs connection and runs each path once; not timed.
            for index in 0..<command.warmup {
                if let warmupConnection {
                    let status = try warmupConnection.post(
                        "/v1/notifications",
                        body: Self.warmupBody(index: index, devices: devices)
                    ) {}
                    guard status == 202 else { throw BenchError("warm-up request answered \(status), not 202") }
                } else {
                    guard sender.send(Self.warmupBody(index: index, devices: devices), port: ports.notification) else {
                        throw BenchError("sendto failed")
                    }
                }
            }
            guard
                try await gateway.waitForLines(
                    containing: "notification request done",
                    count: command.warmup,
                    timeout: 60
                ) != nil
            else { throw BenchError("the \(command.warmup) warm-up requests were not done within 60 s") }
            warmupConnection = nil
            await options.waitForQuietMachine(report: report)

            let total = command.total
            let recorder = TrafficRecorder(capacity: total)
            listener.record(into: recorder)
            let schedule = PacingSchedule(rate: Double(command.rate), total: total)
            let machineBefore = ProcessMetrics.machineCPU()
            let ownBefore = ProcessMetrics.selfCPU()
            let standInBefore = ProcessMetrics.processCPU(pid: haproxy.pid)
            let dropsBefore = ProcessMetrics.udpReceiveBufferErrors()
            let gatewayBefore = gateway.cpu()
            let postgresBefore = postgres.flatMap { PostgresBenchStore.serverCPU(port: $0.port) }
            let switchesBefore = ProcessMetrics.contextSwitches(pid: gateway.pid)
            let start = ContinuousClock.now + .milliseconds(20)
            if http {
                let bodies = (0..<total).map { Self.body(index: $0, devices: devices) }
                let clients = await PacedHTTPClients.run(
                    schedule,
                    connections: command.clients,
                    port: ports.http!,
                    start: start,
                    body: { bodies[$0] },
                    sent: { recorder.sent($0) }
                )
                run.sent = clients.sent
                run.accepted = clients.accepted
                run.otherStatuses = clients.otherStatuses
                run.clientErrors = clients.errors
                run.lateness = clients.lateness
                run.senderSeconds = clients.seconds
                run.clientCPUSeconds = clients.cpuSeconds
                run.roundTrips = clients.roundTrips
            } else {
                let datagrams = (0..<total).map { Self.body(index: $0, devices: devices) }
                let port = ports.notification
                let paced = await PacedSender.run(schedule, start: start) { index in
                    recorder.sent(index)
                    return sender.send(datagrams[index], port: port)
                }
                run.sent = paced.sent
                run.failedSends = paced.failedSends
                run.lateness = paced.lateness
                run.senderSeconds = paced.seconds
            }
            if let before = gatewayBefore, let after = gateway.cpu() { run.sendingGatewayCPU = after - before }
            if let before = switchesBefore, let after = ProcessMetrics.contextSwitches(pid: gateway.pid) {
                run.sendingContextSwitches = after - before
            }

            // Every sent request answered by the stand-in; or --timeout after the last send, or 30 s
            // without a new answer (a datagram the kernel dropped is never answered).
            let deadline = ContinuousClock.now + .seconds(options.timeout)
            var lastProgress = (count: recorder.answered, at: ContinuousClock.now)
            while recorder.answered < run.sent, ContinuousClock.now < deadline,
                ContinuousClock.now - lastProgress.at < .seconds(30)
            {
                try gateway.checkAlive("while the stand-in's receipts were awaited")
                try await Task.sleep(for: .milliseconds(5))
                let answered = recorder.answered
                if answered > lastProgress.count { lastProgress = (answered, ContinuousClock.now) }
            }
            let waitedOut = recorder.answered < run.sent
            // The gateway records each answer after it: its CPU is read once it logged every request done
            // (at most 30 s more).
            let expectedDone = command.warmup + run.sent
            let doneDeadline = ContinuousClock.now + .seconds(30)
            while gateway.log.doneLines < expectedDone, ContinuousClock.now < doneDeadline {
                try gateway.checkAlive("while its done lines were awaited")
                try await Task.sleep(for: .milliseconds(5))
            }
            run.doneLines = gateway.log.doneLines - command.warmup
            let gatewayAfter = gateway.cpu()
            if let postgres, let postgresBefore, let after = PostgresBenchStore.serverCPU(port: postgres.port) {
                run.postgresCPU = after - postgresBefore
            }
            if let before = switchesBefore, let after = ProcessMetrics.contextSwitches(pid: gateway.pid) {
                run.contextSwitches = after - before
            }
            if let before = dropsBefore, let after = ProcessMetrics.udpReceiveBufferErrors() {
                run.kernelDrops = after - before
            }
            let standInAfter = ProcessMetrics.processCPU(pid: haproxy.pid)
            let ownAfter = ProcessMetrics.selfCPU()
            let machineAfter = ProcessMetrics.machineCPU()
            listener.record(into: nil)
            run.tally = recorder.snapshot
            if waitedOut {
                // Counted after the done lines were awaited too: answers kept coming meanwhile.
                run.incomplete =
                    "waiting for the stand-in's receipts stopped at --timeout or after 30 s without a new one; "
                    + "it saw \(run.tally.answered) of \(run.sent) requests in the end"
            }
            if let before = gatewayBefore, let after = gatewayAfter { run.gatewayCPU = after - before }
            if let before = standInBefore, let after = standInAfter { run.standInCPU = after - before }
            if let before = machineBefore, let after = machineAfter {
                let ours =
                    (run.gatewayCPU?.total ?? 0) + (run.standInCPU?.total ?? 0) + (run.postgresCPU?.total ?? 0)
                    + (ownAfter - ownBefore).total
                run.otherMachineCPUSeconds = max(0, (after.busy - before.busy) - ours)
            }
            run.gatewayPeakRSSBytes = gateway.peakRSS()
            if command.h2load, let port = ports.http {
                run.h2load = try await TransactionalH2Load.run(
                    path: command.h2loadPath,
                    port: port,
                    connections: command.clients,
                    pipeline: command.h2loadPipeline,
                    rate: command.rate,
                    seconds: command.seconds,
                    body: Self.warmupBody(index: 0, devices: devices),
                    gateway: gateway
                )
            }
        } catch {
            await gateway.stop()
            throw error
        }
        await gateway.stop()
        return run
    }

    private func summary(_ run: TransactionalRun) {
        let tally = run.tally
        report.line("")
        report.line("summary (transactional, \(command.http ? "HTTP, \(command.clients) clients" : "UDP")):")
        if let incomplete = run.incomplete { report.line("  INCOMPLETE: \(incomplete)") }
        var sent = "  requests sent: \(Format.integer(run.sent)) of \(Format.integer(command.total))"
        // Over the schedule's span (the last request is due 1/rate before its end), or longer when late.
        let span = max(run.senderSeconds, command.seconds)
        sent += " in \(Format.seconds(run.senderSeconds)) s = \(Format.integer(Double(run.sent) / span))/s"
        if run.failedSends > 0 { sent += "; \(Format.integer(run.failedSends)) sends FAILED" }
        report.line(sent)
        report.line("  sender: \(run.lateness.summary)")
        if let accepted = run.accepted {
            var line = "  accepted (202): \(Format.integer(accepted))"
            if !run.otherStatuses.isEmpty {
                line += "; other answers: "
                line += run.otherStatuses.sorted { $0.key < $1.key }.map { "\($0.key) x \($0.value)" }.joined(
                    separator: ", "
                )
            }
            report.line(line)
        }
        if let accepted = run.accepted, let cpu = run.clientCPUSeconds {
            report.line(
                "  accepted/s over the sending: \(Format.integer(Double(accepted) / max(run.senderSeconds, 1e-9))); "
                    + "client threads' CPU \(Format.seconds(cpu)) s = "
                    + "\(Format.micro(cpu / Double(max(1, run.sent)) * 1e6)) µs/request"
            )
        }
        if !run.roundTrips.isEmpty {
            report.line("  client round trip (written → 202 read): \(Percentiles(run.roundTrips).summary)")
        }
        if let sending = run.sendingGatewayCPU {
            var line =
                "  gateway while sending: CPU \(Format.cpu(sending)) = "
                + "\(Format.micro(sending.total / Double(max(1, run.sent)) * 1e6)) µs/request"
            if let switches = run.sendingContextSwitches {
                line += "; \(Format.micro(Double(switches) / Double(max(1, run.sent)))) context switches/request"
            }
            report.line(line)
        }
        if !run.clientErrors.isEmpty {
            report.line(
                "  client errors (\(run.clientErrors.count)): \(run.clientErrors.prefix(3).joined(separator: "; "))"
            )
        }
        var answered = "  answered by the stand-in: \(Format.integer(tally.answered)) of \(Format.integer(tally.sent))"
        if tally.duplicates > 0 { answered += "; \(tally.duplicates) seen twice" }
        if tally.unknown > 0 { answered += "; \(tally.unknown) receipts of no request sent" }
        report.line(answered)
        report.line(
            "  the last answer came \(tally.lagOfLastAnswer.map(Format.milliseconds) ?? "?") after the last request was sent"
        )
        report.line("  send → stand-in receipt: \(Percentiles(tally.latencies).summary)")
        report.line("  gateway 'notification request done' lines: \(Format.integer(run.doneLines))")
        if let drops = run.kernelDrops {
            report.line(
                "  UDP datagrams the kernel dropped for a full receive buffer (RcvbufErrors, machine-wide, the stand-in's receipt lines included): \(Format.integer(drops))"
            )
        }
        var cpu = "  gateway CPU: \(run.gatewayCPU.map(Format.cpu) ?? "?")"
        if let perRequest = run.cpuPerRequestSeconds {
            cpu += " = \(Format.micro(perRequest * 1e6)) µs/request"
        }
        if let postgres = run.postgresCPU, run.sent > 0 {
            cpu +=
                "; PostgreSQL \(Format.cpu(postgres)) = \(Format.micro(postgres.total / Double(run.sent) * 1e6)) µs/request"
        }
        cpu += "; stand-in \(run.standInCPU.map { Format.seconds($0.total) + " s" } ?? "?")"
        if let other = run.otherMachineCPUSeconds { cpu += "; other CPU \(Format.seconds(other)) s" }
        report.line(cpu)
        if let switches = run.contextSwitches {
            report.line(
                "  gateway context switches, whole run: \(Format.integer(switches)) = "
                    + "\(Format.micro(Double(switches) / Double(max(1, run.sent))))/request"
            )
        }
        report.line(
            "  gateway peak RSS (VmHWM): \(Format.mebibytes(run.gatewayPeakRSSBytes)); load average \(FileSystem.loadAverage() ?? "?") at the end"
        )
        if let h2load = run.h2load { h2load.describe(report: report) }
    }
}
