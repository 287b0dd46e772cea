import Foundation

/// Prints what a person reads (stdout, or stderr with `--json`) and, with `--json`, one JSON
/// document on stdout at the end.
final class Report: Sendable {
    private let json: Bool

    init(json: Bool) {
        self.json = json
    }

    func line(_ text: String) {
        // Unbuffered, so that progress shows while the next run goes.
        let handle = json ? FileHandle.standardError : FileHandle.standardOutput
        handle.write(Data((text + "\n").utf8))
    }

    // MARK: Runs

    func header(mode: BenchCommand.Mode, options: BenchOptions) {
        line(
            "pushgate-bench \(mode.rawValue): \(Format.integer(options.count)) notifications per run, connections \(options.connections.map(String.init).joined(separator: ",")), \(options.repetitions) run(s) each"
        )
        line("  server: \(Self.serverDescription(options))")
        if mode != .h2load {
            line(
                "  client: \(options.clientThreads) event-loop thread(s), in flight ≤ \(Format.integer(options.inFlight)), batches of \(options.batch), streams per connection \(options.streams.map(String.init) ?? "as the server allows"), warm-up \(Format.integer(options.warmup)) (not timed), token auth (throwaway P-256 key)"
            )
        }
        if mode != .client {
            line("  h2load: \(options.h2loadPath) -t 1 -m \(options.h2loadStreams), no credentials")
        }
        if options.externalEndpoint == nil && !options.simulatorProcess && mode != .h2load {
            line(
                "  caveat: the simulator runs in this process: the process CPU includes it. 'client CPU' subtracts the simulator's event-loop threads; use --simulator-process to measure the client alone."
            )
        }
        line(
            "  caveat: client and server share this machine's \(ProcessInfo.processInfo.activeProcessorCount) cores; 'other CPU' is what everything else used during the run."
        )
    }

    func clientRun(_ result: ClientRunResult, run: Int, of total: Int) {
        var first =
            "client \(Format.connections(result.connectionsRequested)), run \(run)/\(total): \(Format.integer(result.completed)) notifications in \(Format.seconds(result.seconds)) s = \(Format.integer(result.notificationsPerSecond))/s; accepted \(Format.integer(result.accepted)), failed \(Format.integer(result.failed)); connections used \(result.connectionsUsed)"
        if result.timedOut { first += "; INCOMPLETE: stopped after the timeout" }
        if !result.failures.isEmpty {
            first +=
                "; failures: "
                + result.failures.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        }
        line(first)
        let perNotification = "\(Format.micro(result.clientCPUMicrosecondsPerNotification)) µs/notification"
        var cpu = "  CPU: "
        switch result.placement {
        case .inProcess:
            cpu +=
                "client ≈ \(Format.cpu(result.clientCPU)) = \(perNotification); process \(Format.seconds(result.processCPU.total)) s (client + simulator), simulator threads \(result.simulatorCPU.map { Format.seconds($0.total) } ?? "?") s"
        case .process:
            cpu +=
                "client \(Format.cpu(result.clientCPU)) = \(perNotification); simulator process \(result.simulatorCPU.map { Format.seconds($0.total) } ?? "?") s"
        case .external:
            cpu += "client \(Format.cpu(result.clientCPU)) = \(perNotification)"
        }
        if let other = result.otherMachineCPUSeconds { cpu += "; other CPU \(Format.seconds(other)) s" }
        line(cpu)
        var memory = "  peak RSS: \(Format.mebibytes(result.peakRSSBytes))"
        memory += result.placement == .inProcess ? " (client + simulator)" : " (client)"
        if let simulator = result.simulatorPeakRSSBytes {
            memory += "; simulator process \(Format.mebibytes(simulator))"
        }
        if let accepted = result.simulatorAccepted {
            memory += "; simulator counted \(Format.integer(accepted)) accepted"
        }
        line(memory)
    }

    func h2loadRun(_ result: H2LoadRunResult, run: Int, of total: Int) {
        var first =
            "h2load \(Format.connections(result.connections)) (-m \(result.streamsPerConnection)), run \(run)/\(total): \(Format.integer(result.notifications)) requests in \(Format.seconds(result.seconds)) s = \(Format.integer(result.requestsPerSecond))/s; succeeded \(result.succeeded.map(Format.integer) ?? "?"), 2xx \(result.status2xx.map(Format.integer) ?? "?")"
        if result.timedOut { first += "; INCOMPLETE: stopped after the timeout" }
        line(first)
        var cpu =
            "  CPU: h2load \(Format.cpu(result.h2loadCPU)) = \(Format.micro(result.h2loadCPU.total / Double(result.notifications) * 1e6)) µs/request"
        if let simulator = result.simulatorCPU { cpu += "; simulator \(Format.seconds(simulator.total)) s" }
        if let other = result.otherMachineCPUSeconds { cpu += "; other CPU \(Format.seconds(other)) s" }
        line(cpu)
        line("  command: \(result.command)")
    }

    // MARK: Summary

    func summary(mode: BenchCommand.Mode, options: BenchOptions, client: [ClientRunResult], h2load: [H2LoadRunResult]) {
        var rows: [SummaryRow] = []
        for connections in options.connections {
            let runs = client.filter { $0.connectionsRequested == connections }
            guard !runs.isEmpty else { continue }
            rows.append(
                SummaryRow(
                    what: "client",
                    connections: connections,
                    runs: runs.count,
                    perSecond: Spread(runs.map(\.notificationsPerSecond)),
                    cpuMicrosecondsPerNotification: Spread(runs.map(\.clientCPUMicrosecondsPerNotification)),
                    peakRSSBytes: runs.compactMap(\.peakRSSBytes).max(),
                    incompleteRuns: runs.filter { $0.timedOut || $0.completed < $0.notifications }.count,
                    failedNotifications: runs.map(\.failed).reduce(0, +)
                )
            )
        }
        for connections in options.connections {
            let runs = h2load.filter { $0.connections == connections }
            guard !runs.isEmpty else { continue }
            rows.append(
                SummaryRow(
                    what: "h2load",
                    connections: connections,
                    runs: runs.count,
                    perSecond: Spread(runs.map(\.requestsPerSecond)),
                    cpuMicrosecondsPerNotification: Spread(
                        runs.map { $0.h2loadCPU.total / Double($0.notifications) * 1e6 }
                    ),
                    peakRSSBytes: nil,
                    incompleteRuns: runs.filter(\.timedOut).count,
                    failedNotifications: runs.compactMap(\.failed).reduce(0, +)
                )
            )
        }
        var ratios: [RatioRow] = []
        for connections in options.connections {
            guard let ours = rows.first(where: { $0.what == "client" && $0.connections == connections }),
                let ceiling = rows.first(where: { $0.what == "h2load" && $0.connections == connections })
            else { continue }
            ratios.append(
                RatioRow(
                    connections: connections,
                    clientPerSecond: ours.perSecond.median,
                    h2loadPerSecond: ceiling.perSecond.median
                )
            )
        }

        line("")
        line("summary:")
        line("  server: \(Self.serverDescription(options)); \(Format.integer(options.count)) notifications per run")
        line("  median (min-max) over the runs; CPU per notification is the client's (h2load's own for h2load rows)")
        for row in rows {
            var text =
                "  \(row.what.padding(toLength: 6, withPad: " ", startingAt: 0)) \(Format.connections(row.connections).padding(toLength: 13, withPad: " ", startingAt: 0))"
            text +=
                " \(Format.integer(row.perSecond.median))/s (\(Format.integer(row.perSecond.minimum))-\(Format.integer(row.perSecond.maximum)))"
            text +=
                ", CPU \(Format.micro(row.cpuMicrosecondsPerNotification.median)) µs/notification (\(Format.micro(row.cpuMicrosecondsPerNotification.minimum))-\(Format.micro(row.cpuMicrosecondsPerNotification.maximum)))"
            if let peak = row.peakRSSBytes { text += ", peak RSS \(Format.mebibytes(peak))" }
            text += ", \(row.runs) run(s)"
            if row.incompleteRuns > 0 { text += ", \(row.incompleteRuns) INCOMPLETE" }
            if row.failedNotifications > 0 { text += ", \(Format.integer(row.failedNotifications)) failed" }
            line(text)
        }
        for ratio in ratios {
            line(
                "  client / h2load at \(Format.connections(ratio.connections)): \(Format.ratio(ratio.ratio)) (\(Format.integer(ratio.clientPerSecond))/s vs \(Format.integer(ratio.h2loadPerSecond))/s, medians)"
            )
        }
        if rows.isEmpty { line("  (no runs)") }

        if json {
            let document = JSONDocument(
                mode: mode.rawValue,
                server: Self.serverDescription(options),
                notificationsPerRun: options.count,
                connections: options.connections,
                repetitions: options.repetitions,
                inFlight: options.inFlight,
                batch: options.batch,
                clientThreads: options.clientThreads,
                simulatorThreads: options.simulatorThreads,
                streamsPerConnection: options.streams,
                h2loadStreams: options.h2loadStreams,
                client: client,
                h2load: h2load,
                summary: rows,
                ratios: ratios
            )
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            if let data = try? encoder.encode(document) {
                FileHandle.standardOutput.write(data + Data("\n".utf8))
            }
        }
    }

    private static func serverDescription(_ options: BenchOptions) -> String {
        if let endpoint = options.externalEndpoint { return "\(endpoint) (external)" }
        let placement = options.simulatorProcess ? "separate process (pushgate simulate)" : "in this process"
        return
            "our simulator, accept-all, \(placement), \(options.simulatorThreads) event-loop thread(s), max \(options.maxConcurrentStreams) streams per connection"
    }
}

struct Spread: Codable, Sendable {
    var median: Double
    var minimum: Double
    var maximum: Double

    init(_ values: [Double]) {
        let sorted = values.sorted()
        if sorted.isEmpty {
            (median, minimum, maximum) = (0, 0, 0)
        } else {
            let middle = sorted.count / 2
            median = sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
            minimum = sorted.first!
            maximum = sorted.last!
        }
    }
}

struct SummaryRow: Codable, Sendable {
    var what: String
    var connections: Int
    var runs: Int
    var perSecond: Spread
    var cpuMicrosecondsPerNotification: Spread
    var peakRSSBytes: Int?
    var incompleteRuns: Int
    var failedNotifications: Int
}

struct RatioRow: Codable, Sendable {
    var connections: Int
    var clientPerSecond: Double
    var h2loadPerSecond: Double
    var ratio: Double { h2loadPerSecond > 0 ? clientPerSecond / h2loadPerSecond : 0 }

    enum CodingKeys: String, CodingKey {
        case connections, clientPerSecond, h2loadPerSecond, ratio
    }

    init(connections: Int, clientPerSecond: Double, h2loadPerSecond: Double) {
        self.connections = connections
        self.clientPerSecond = clientPerSecond
        self.h2loadPerSecond = h2loadPerSecond
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        connections = try container.decode(Int.self, forKey: .connections)
        clientPerSecond = try container.decode(Double.self, forKey: .clientPerSecond)
        h2loadPerSecond = try container.decode(Double.self, forKey: .h2loadPerSecond)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(connections, forKey: .connections)
        try container.encode(clientPerSecond, forKey: .clientPerSecond)
        try container.encode(h2loadPerSecond, forKey: .h2loadPerSecond)
        try container.encode(ratio, forKey: .ratio)
    }
}

struct JSONDocument: Codable, Sendable {
    var mode: String
    var server: String
    var notificationsPerRun: Int
    var connections: [Int]
    var repetitions: Int
    var inFlight: Int
    var batch: Int
    var clientThreads: Int
    var simulatorThreads: Int
    var streamsPerConnection: Int?
    var h2loadStreams: Int
    var client: [ClientRunResult]
    var h2load: [H2LoadRunResult]
    var summary: [SummaryRow]
    var ratios: [RatioRow]
}

/// Number formats for the readable lines.
enum Format {
    static func integer(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var result = ""
        for (index, character) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { result.append(",") }
            result.append(character)
        }
        return value < 0 ? "-" + result : result
    }

    static func integer(_ value: Double) -> String {
        value.isFinite ? integer(Int(value.rounded())) : "?"
    }

    static func seconds(_ value: Double) -> String { String(format: "%.2f", value) }
    static func micro(_ value: Double) -> String { String(format: "%.1f", value) }
    static func ratio(_ value: Double) -> String { String(format: "%.2f", value) }
    static func percent(_ value: Double) -> String { String(format: "%.0f %%", value * 100) }

    static func cpu(_ time: CPUTime) -> String {
        "user \(seconds(time.user)) s + sys \(seconds(time.system)) s = \(seconds(time.total)) s"
    }

    static func mebibytes(_ bytes: Int?) -> String {
        guard let bytes else { return "?" }
        return String(format: "%.1f MiB", Double(bytes) / 1_048_576)
    }

    static func connections(_ count: Int) -> String {
        count == 1 ? "1 connection" : "\(count) connections"
    }
}
