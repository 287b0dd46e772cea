import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One h2load run against a target: the machine's ceiling for an HTTP/2 client here, against the
/// same server our client talks to.
struct H2LoadRunResult: Sendable, Codable {
    var connections: Int
    var streamsPerConnection: Int
    var notifications: Int
    var succeeded: Int?
    var failed: Int?
    var status2xx: Int?
    var timedOut: Bool
    /// h2load's own "finished in X s".
    var seconds: Double
    /// h2load's own "Y req/s".
    var requestsPerSecond: Double
    /// h2load's CPU (it exits and is waited for, so RUSAGE_CHILDREN counts it).
    var h2loadCPU: CPUTime
    var simulatorCPU: CPUTime?
    var otherMachineCPUSeconds: Double?
    var simulatorPeakRSSBytes: Int?
    var placement: BenchTarget.Placement
    var command: String

    var microsecondsPerRequest: Double { h2loadCPU.total / Double(max(1, succeeded ?? notifications)) * 1e6 }
}

enum H2LoadBenchmark {
    static func isInstalled(_ path: String) -> Bool {
        FileManager.default.isExecutableFile(atPath: path)
    }

    static func run(options: BenchOptions, connections: Int, target: BenchTarget) async throws -> H2LoadRunResult {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "pushgate-bench-h2load-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let payloadPath = directory.appendingPathComponent("payload.json").path
        try Data(ClientBenchmark.payload.utf8).write(to: URL(fileURLWithPath: payloadPath))

        let device = String(repeating: "ab", count: 32)
        let host = target.host.contains(":") ? "[\(target.host)]" : target.host
        let arguments = [
            "-n", String(options.count), "-c", String(connections), "-m", String(options.h2loadStreams), "-t", "1",
            "-H", "apns-topic: \(options.topic)", "-H", "apns-push-type: alert", "-H", "apns-priority: 10",
            "-H", "apns-expiration: 0", "-d", payloadPath,
            "https://\(host):\(target.port)/3/device/\(device)",
        ]
        let command = ([options.h2loadPath] + arguments.map(shellQuoted)).joined(separator: " ")
            .replacingOccurrences(of: payloadPath, with: "<payload file>")

        let process = Process()
        process.executableURL = URL(fileURLWithPath: options.h2loadPath)
        process.arguments = arguments
        let outputPath = directory.appendingPathComponent("h2load.out").path
        guard FileManager.default.createFile(atPath: outputPath, contents: nil) else {
            throw BenchError("cannot create \(outputPath)")
        }
        let outputHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.standardOutput = outputHandle
        process.standardError = outputHandle

        let machineBefore = ProcessMetrics.machineCPU()
        let simulatorBefore = target.simulatorCPU()
        let childrenBefore = ProcessMetrics.childrenCPU()
        let ownBefore = ProcessMetrics.selfCPU()
        try process.run()
        ChildProcesses.register(process.processIdentifier, as: .tool)
        let deadline = Date().addingTimeInterval(Double(options.timeout))
        while process.isRunning && Date() < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        let timedOut = process.isRunning
        if timedOut {
            process.terminate()
            let killDeadline = Date().addingTimeInterval(3)
            while process.isRunning && Date() < killDeadline { try await Task.sleep(for: .milliseconds(20)) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        process.waitUntilExit()
        ChildProcesses.unregister(.tool)
        try? outputHandle.close()
        let h2loadCPU = ProcessMetrics.childrenCPU() - childrenBefore
        let ownCPU = ProcessMetrics.selfCPU() - ownBefore
        let simulatorAfter = target.simulatorCPU()
        let machineAfter = ProcessMetrics.machineCPU()

        let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        let parsed = H2LoadOutput(output)
        guard let seconds = parsed.seconds, let rate = parsed.requestsPerSecond else {
            throw BenchError(
                "could not read h2load's result (status \(process.terminationStatus)):\n\(output.suffix(2_000))"
            )
        }
        let simulatorCPU: CPUTime? = {
            guard let before = simulatorBefore, let after = simulatorAfter else { return nil }
            return after - before
        }()
        var other: Double? = nil
        if let before = machineBefore, let after = machineAfter {
            // In process, our own CPU is the simulator's threads (plus a little polling).
            var ours = h2loadCPU.total + ownCPU.total
            if target.placement == .process { ours += simulatorCPU?.total ?? 0 }
            other = max(0, (after.busy - before.busy) - ours)
        }
        return H2LoadRunResult(
            connections: connections,
            streamsPerConnection: options.h2loadStreams,
            notifications: options.count,
            succeeded: parsed.succeeded,
            failed: parsed.failed,
            status2xx: parsed.status2xx,
            timedOut: timedOut,
            seconds: seconds,
            requestsPerSecond: rate,
            h2loadCPU: h2loadCPU,
            simulatorCPU: simulatorCPU,
            otherMachineCPUSeconds: other,
            simulatorPeakRSSBytes: target.simulatorPeakRSS(),
            placement: target.placement,
            command: command
        )
    }

    private static func shellQuoted(_ argument: String) -> String {
        let plain = argument.allSatisfy { $0.isLetter || $0.isNumber || "-_./:=,@".contains($0) }
        return plain ? argument : "'" + argument.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}

/// The lines of h2load's report that matter:
/// `finished in 1.07s, 186915.89 req/s, 9.45MB/s`,
/// `requests: 200000 total, 200000 started, 200000 done, 200000 succeeded, 0 failed, 0 errored, 0 timeout`,
/// `status codes: 200000 2xx, 0 3xx, 0 4xx, 0 5xx`.
struct H2LoadOutput {
    var seconds: Double?
    var requestsPerSecond: Double?
    var succeeded: Int?
    var failed: Int?
    var status2xx: Int?

    init(_ text: String) {
        for rawLine in text.split(separator: "\n") {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("finished in ") {
                let parts = line.dropFirst("finished in ".count).split(separator: ",").map {
                    $0.trimmingCharacters(in: .whitespaces)
                }
                if let first = parts.first { seconds = Self.duration(first) }
                if parts.count > 1, parts[1].hasSuffix(" req/s") {
                    requestsPerSecond = Double(parts[1].dropLast(" req/s".count))
                }
            } else if line.hasPrefix("requests: ") {
                succeeded = Self.count(before: "succeeded", in: line)
                failed = Self.count(before: "failed", in: line)
            } else if line.hasPrefix("status codes: ") {
                status2xx = Self.count(before: "2xx", in: line)
            }
        }
    }

    /// `1.07s`, `850.12ms`, `12.5us`.
    private static func duration(_ text: String) -> Double? {
        for (suffix, scale) in [("ms", 1e-3), ("us", 1e-6), ("s", 1.0)] where text.hasSuffix(suffix) {
            return Double(text.dropLast(suffix.count)).map { $0 * scale }
        }
        return nil
    }

    /// The number in front of `word` in a comma-separated list (`200000 succeeded`).
    private static func count(before word: String, in line: String) -> Int? {
        let body = line.split(separator: ":", maxSplits: 1).last ?? Substring(line)
        for item in body.split(separator: ",") {
            let words = item.split(separator: " ")
            if words.count == 2, words[1] == word { return Int(words[0]) }
        }
        return nil
    }
}
