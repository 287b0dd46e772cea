import APNsHTTP2
import ArgumentParser
import Foundation

/// `pushgate-bench` (see docs/benchmarks.md): figures, printed, never pass/fail (STYLE §17). The APNs
/// client against the simulator (client, h2load, all), and the gateway end to end (e2e,
/// registrations, latency, and mixed traffic: transactional, hol).
@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushgate-bench",
        abstract: "Measure pushgate: the APNs client against the simulator, and the gateway end to end.",
        discussion: """
            Build in release first: swift build -c release --product pushgate-bench, then the same with \
            --product pushgate. \
            The client modes run in this process (or with --simulator-process); the gateway modes \
            (e2e, registrations, latency) start `pushgate gateway` from beside this binary as a child \
            process and measure it alone.
            """,
        subcommands: [
            ClientCommand.self, H2LoadCommand.self, AllCommand.self, EndToEndCommand.self, RegistrationsCommand.self,
            LatencyCommand.self, TransactionalCommand.self, HeadOfLineCommand.self, TwoAppsCommand.self,
            SoakCommand.self, MicroCommand.self, RetentionCommand.self, LedgerWriteCommand.self,
            WebPushBenchCommand.self,
            WebPushGatewayCommand.self,
        ],
        defaultSubcommand: ClientCommand.self
    )

    enum Mode: String, CaseIterable, Codable {
        case client, h2load, all
    }
}

/// `pushgate-bench client`: our APNs client against the simulator.
struct ClientCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "client",
        abstract: "Our APNs client against the simulator (the default mode)."
    )
    @OptionGroup var options: ClientBenchOptions
    func run() async throws { try await options.run(mode: .client) }
}

/// `pushgate-bench h2load`: the machine's HTTP/2 client ceiling against the same simulator.
struct H2LoadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "h2load",
        abstract: "h2load against the simulator: the machine's ceiling for an HTTP/2 client."
    )
    @OptionGroup var options: ClientBenchOptions
    func run() async throws { try await options.run(mode: .h2load) }
}

/// `pushgate-bench all`: client, then h2load, then the summary with the ratios.
struct AllCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "all",
        abstract: "client, then h2load, then a summary with client / h2load."
    )
    @OptionGroup var options: ClientBenchOptions
    func run() async throws { try await options.run(mode: .all) }
}

/// The options of the client modes. Every run sends --count notifications to distinct device
/// tokens. In process, the simulator shares this process and its CPU figure; --simulator-process
/// runs it as `pushgate simulate` beside this binary instead.
struct ClientBenchOptions: ParsableArguments {
    @Option(help: "Notifications per run.")
    var count: Int = 200_000

    @Option(help: "Connection counts to run, comma-separated (e.g. 1,4).")
    var connections: String = "1,4"

    @Option(name: .customLong("in-flight"), help: "Most requests submitted and not yet answered.")
    var inFlight: Int = 4_000

    @Option(help: "Requests per submit(_:) call.")
    var batch: Int = 500

    @Option(help: "Our cap on concurrent streams per connection (default: whatever the server allows).")
    var streams: Int?

    @Option(name: .customLong("client-threads"), help: "The client's event-loop threads.")
    var clientThreads: Int = 1

    @Option(name: .customLong("simulator-threads"), help: "The simulator's event-loop threads.")
    var simulatorThreads: Int = 1

    @Option(name: .customLong("max-concurrent-streams"), help: "SETTINGS_MAX_CONCURRENT_STREAMS the simulator sends.")
    var maxConcurrentStreams: Int = 1_000

    @Flag(
        name: .customLong("simulator-process"),
        help: "Run the simulator as a separate process (`pushgate simulate`), so that client CPU is measured alone."
    )
    var simulatorProcess = false

    @Option(
        name: .customLong("pushgate-binary"),
        help: "The pushgate executable for --simulator-process (default: beside this one)."
    )
    var pushgateBinary: String?

    @Option(
        name: .customLong("apns-host"),
        help: "Send to this HOST:PORT instead of a simulator we start (it must accept any provider token)."
    )
    var apnsHost: String?

    @Option(help: "CA certificate (PEM) that signed --apns-host's certificate (default: the system trust store).")
    var ca: String?

    @Option(help: "apns-topic of every notification.")
    var topic: String = "com.example.bench"

    @Option(help: "Notifications sent before each timed client run (opens the connections; not timed).")
    var warmup: Int = 10_000

    @Option(name: .customLong("repeat"), help: "Runs of each configuration (the summary gives median and range).")
    var repetitions: Int = 1

    @Option(help: "Seconds after which a run is stopped and reported as incomplete.")
    var timeout: Int = 120

    @Option(name: .customLong("h2load"), help: "The h2load executable (Debian: nghttp2-client).")
    var h2loadPath: String = "/usr/bin/h2load"

    @Option(name: .customLong("h2load-streams"), help: "h2load -m: concurrent streams per connection.")
    var h2loadStreams: Int = 100

    @Option(
        name: .customLong("quiet-wait"),
        help:
            "Before each run, wait up to this many seconds for the machine to be at most --quiet-threshold busy (0: don't wait)."
    )
    var quietWait: Int = 30

    @Option(name: .customLong("quiet-threshold"), help: "Busy fraction of all cores (0-1) that counts as quiet.")
    var quietThreshold: Double = 0.3

    @Flag(help: "Print the results as one JSON document on stdout (the readable lines go to stderr).")
    var json = false

    func validate() throws {
        guard count >= 1 else { throw ValidationError("--count must be at least 1") }
        guard inFlight >= 1 else { throw ValidationError("--in-flight must be at least 1") }
        guard batch >= 1 else { throw ValidationError("--batch must be at least 1") }
        guard clientThreads >= 1, simulatorThreads >= 1 else {
            throw ValidationError("thread counts must be at least 1")
        }
        guard repetitions >= 1, repetitions <= 20 else { throw ValidationError("--repeat must be 1...20") }
        guard (1...3_600).contains(timeout) else { throw ValidationError("--timeout must be 1...3600 seconds") }
        guard warmup >= 0 else { throw ValidationError("--warmup must be ≥ 0") }
        guard h2loadStreams >= 1 else { throw ValidationError("--h2load-streams must be at least 1") }
        guard (0...600).contains(quietWait) else { throw ValidationError("--quiet-wait must be 0...600 seconds") }
        if let streams, streams < 1 { throw ValidationError("--streams must be at least 1") }
        _ = try parsedConnections()
        if let apnsHost {
            do {
                _ = try APNsClient.Endpoint(parsing: apnsHost)
            } catch {
                throw ValidationError("--apns-host: \(error)")
            }
            if simulatorProcess { throw ValidationError("--apns-host and --simulator-process exclude each other") }
        }
        if ca != nil && apnsHost == nil { throw ValidationError("--ca only applies with --apns-host") }
    }

    private func parsedConnections() throws -> [Int] {
        let values = connections.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !values.isEmpty, values.allSatisfy({ $0 != nil && (1...64).contains($0!) }) else {
            throw ValidationError("--connections takes counts 1...64, comma-separated (e.g. 1,4)")
        }
        return values.map { $0! }
    }

    func run(mode: BenchCommand.Mode) async throws {
        ChildProcesses.installSignalHandlers()
        let options = BenchOptions(
            count: count,
            connections: try parsedConnections(),
            inFlight: inFlight,
            batch: batch,
            streams: streams,
            clientThreads: clientThreads,
            simulatorThreads: simulatorThreads,
            maxConcurrentStreams: maxConcurrentStreams,
            simulatorProcess: simulatorProcess,
            pushgateBinaryOverride: pushgateBinary,
            externalEndpoint: try apnsHost.map { try APNsClient.Endpoint(parsing: $0) },
            ca: ca,
            topic: topic,
            warmup: warmup,
            repetitions: repetitions,
            timeout: timeout,
            h2loadPath: h2loadPath,
            h2loadStreams: h2loadStreams,
            quietWait: quietWait,
            quietThreshold: quietThreshold
        )
        let report = Report(json: json)
        do {
            try await BenchRunner(mode: mode, options: options, report: report).run()
        } catch let error as BenchError {
            report.line("pushgate-bench: \(error.description)")
            throw ExitCode.failure
        }
    }
}

/// The command's options, as a plain value the runs share.
struct BenchOptions: Sendable {
    var count: Int
    var connections: [Int]
    var inFlight: Int
    var batch: Int
    var streams: Int?
    var clientThreads: Int
    var simulatorThreads: Int
    var maxConcurrentStreams: Int
    var simulatorProcess: Bool
    var pushgateBinaryOverride: String?
    var externalEndpoint: APNsClient.Endpoint?
    var ca: String?
    var topic: String
    var warmup: Int
    var repetitions: Int
    var timeout: Int
    var h2loadPath: String
    var h2loadStreams: Int
    var quietWait: Int
    var quietThreshold: Double

    func pushgateBinary() throws -> String {
        try PushgateBinary.locate(override: pushgateBinaryOverride, neededFor: "--simulator-process")
    }
}

enum PushgateBinary {
    /// `pushgate` from the same build directory as this executable, unless overridden.
    static func locate(override: String?, neededFor purpose: String) throws -> String {
        if let override {
            guard FileManager.default.isExecutableFile(atPath: override) else {
                throw BenchError("--pushgate-binary: \(override) is not an executable file")
            }
            return override
        }
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        let candidate = URL(fileURLWithPath: executable).deletingLastPathComponent().appendingPathComponent("pushgate")
            .path
        guard FileManager.default.isExecutableFile(atPath: candidate) else {
            throw BenchError(
                "\(purpose) needs the pushgate executable at \(candidate): build it with `swift build -c release --package-path Benchmarks --product pushgate`, or pass --pushgate-binary"
            )
        }
        return candidate
    }
}
