import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `transactional --http --h2load`: h2load over HTTP/1.1 (`--h1`, a C client) against the gateway the run
/// used, with the run's connections, one request in flight on each (`-m 1`, as our clients; more with
/// `--h2load-pipeline`, HTTP/1.1 pipelining) and the run's rate (`--rps` per connection), for the run's
/// seconds. One fixed body for every request (h2load cannot
/// vary it), a warm-up request's, which the stand-in does not log: this compares the clients, not the
/// latencies.
struct TransactionalH2Load: Sendable {
    var command: String
    var output: H2LoadOutput
    var seconds: Double
    var h2loadCPU: CPUTime
    var gatewayCPU: CPUTime?
    var contextSwitches: Int?

    static func run(
        path: String,
        port: Int,
        connections: Int,
        pipeline: Int,
        rate: Int,
        seconds: Double,
        body: [UInt8],
        gateway: GatewayProcess
    ) async throws -> TransactionalH2Load {
        guard FileManager.default.isExecutableFile(atPath: path) else { throw BenchError("no h2load at \(path)") }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "pushgate-bench-h2load-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let bodyPath = directory.appendingPathComponent("body.json").path
        try Data(body).write(to: URL(fileURLWithPath: bodyPath))
        let arguments = Self.arguments(
            port: port,
            connections: connections,
            pipeline: pipeline,
            rate: rate,
            seconds: seconds,
            bodyPath: bodyPath
        )
        let command = ([path] + arguments).joined(separator: " ").replacingOccurrences(of: bodyPath, with: "<body>")
        let outputPath = directory.appendingPathComponent("h2load.out").path
        guard FileManager.default.createFile(atPath: outputPath, contents: nil) else {
            throw BenchError("cannot create \(outputPath)")
        }
        let outputHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        defer { try? outputHandle.close() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardOutput = outputHandle
        process.standardError = outputHandle

        let gatewayBefore = gateway.cpu()
        let switchesBefore = ProcessMetrics.contextSwitches(pid: gateway.pid)
        let childrenBefore = ProcessMetrics.childrenCPU()
        let start = ContinuousClock.now
        try process.run()
        ChildProcesses.register(process.processIdentifier, as: .tool)
        while process.isRunning { try await Task.sleep(for: .milliseconds(10)) }
        process.waitUntilExit()
        ChildProcesses.unregister(.tool)
        var result = TransactionalH2Load(
            command: command,
            output: H2LoadOutput((try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""),
            seconds: (ContinuousClock.now - start).seconds,
            h2loadCPU: ProcessMetrics.childrenCPU() - childrenBefore
        )
        if let before = gatewayBefore, let after = gateway.cpu() { result.gatewayCPU = after - before }
        if let before = switchesBefore, let after = ProcessMetrics.contextSwitches(pid: gateway.pid) {
            result.contextSwitches = after - before
        }
        guard result.output.requestsPerSecond != nil else {
            let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            throw BenchError("could not read h2load's result:\n\(text.suffix(2_000))")
        }
        return result
    }

    /// h2load's arguments: `connections` HTTP/1.1 connections, `pipeline` requests in flight on each (its
    /// `-m`), `rate` a second in all (`--rps` is per connection), for `seconds` (rounded up).
    static func arguments(
        port: Int,
        connections: Int,
        pipeline: Int,
        rate: Int,
        seconds: Double,
        bodyPath: String
    ) -> [String] {
        [
            "--h1", "-c", String(connections), "-m", String(pipeline), "-t", "1",
            "-D", String(format: "%.0f", seconds.rounded(.up)),
            "--rps", String(format: "%.3f", Double(rate) / Double(connections)),
            "-H", "content-type: application/json", "-d", bodyPath,
            "http://127.0.0.1:\(port)/v1/notifications",
        ]
    }

    func describe(report: Report) {
        let done = max(1, output.succeeded ?? 0)
        report.line("")
        report.line("h2load, same gateway, after the run: \(command)")
        var line =
            "  \(Format.integer(output.status2xx ?? 0)) 2xx of \(Format.integer(output.succeeded ?? 0)) succeeded "
            + "(\(Format.integer(output.failed ?? 0)) failed) = \(Format.integer(output.requestsPerSecond ?? 0)) req/s; "
            + "h2load CPU \(Format.seconds(h2loadCPU.total)) s = \(Format.micro(h2loadCPU.total / Double(done) * 1e6)) µs/request"
        if let gatewayCPU {
            line += "; gateway \(Format.micro(gatewayCPU.total / Double(done) * 1e6)) µs/request"
        }
        if let contextSwitches {
            line += ", \(Format.micro(Double(contextSwitches) / Double(done))) context switches/request"
        }
        report.line(line)
    }
}
