import APNsHTTP2
import ArgumentParser
import Foundation

/// Options shared by the gateway modes (e2e, registrations, latency).
struct GatewayBenchOptions: ParsableArguments {
    @Option(
        name: .customLong("apns-host"),
        help: "Point the gateway at this HOST:PORT instead of a simulator we start (it must accept any provider token)."
    )
    var apnsHost: String?

    @Option(help: "CA certificate (PEM) that signed --apns-host's certificate (default: the system trust store).")
    var ca: String?

    @Option(name: .customLong("pushgate-binary"), help: "The pushgate executable (default: beside this one).")
    var pushgateBinary: String?

    @Option(
        name: .customLong("gateway-arg"),
        parsing: .unconditionalSingleValue,
        help: "An extra argument for `pushgate gateway` (repeatable), e.g. --gateway-arg=--max-streams=1000."
    )
    var gatewayArguments: [String] = []

    @Option(name: .customLong("simulator-threads"), help: "Event-loop threads of the simulator process.")
    var simulatorThreads: Int = 1

    @Option(name: .customLong("max-concurrent-streams"), help: "SETTINGS_MAX_CONCURRENT_STREAMS the simulator sends.")
    var maxConcurrentStreams: Int = 1_000

    @Option(
        name: .customLong("rtt-ms"),
        help: """
            Use the haproxy stand-in (scripts/haproxy-apns-standin.sh, a fresh apns-id per answer) holding \
            every answer this many milliseconds (0: at once) instead of our simulator.
            """
    )
    var rttMilliseconds: Int?

    @Option(
        name: .customLong("standin-script"),
        help: "The haproxy stand-in script for --rtt-ms (default: scripts/haproxy-apns-standin.sh of this checkout)."
    )
    var standInScript: String?

    @Option(help: "apns-topic (the gateway's --topic).")
    var topic: String = "com.example.bench"

    @Option(help: "Seconds after which a run is abandoned and reported as incomplete.")
    var timeout: Int = 300

    @Option(
        name: .customLong("quiet-wait"),
        help:
            "Before each run, wait up to this many seconds for the machine to be at most --quiet-threshold busy (0: don't wait)."
    )
    var quietWait: Int = 10

    @Option(name: .customLong("quiet-threshold"), help: "Busy fraction of all cores (0-1) that counts as quiet.")
    var quietThreshold: Double = 0.3

    @Option(
        help:
            "Directory for the temporary databases (default: the system's temporary directory). Its file system's fsync cost is part of what the gateway does."
    )
    var directory: String?

    func validate() throws {
        if let apnsHost {
            do {
                _ = try APNsClient.Endpoint(parsing: apnsHost)
            } catch {
                throw ValidationError("--apns-host: \(error)")
            }
        }
        if ca != nil && apnsHost == nil { throw ValidationError("--ca only applies with --apns-host") }
        if let rttMilliseconds {
            guard (0...60_000).contains(rttMilliseconds) else { throw ValidationError("--rtt-ms must be 0...60000") }
            if apnsHost != nil { throw ValidationError("--rtt-ms starts its own stand-in: it excludes --apns-host") }
        }
        guard simulatorThreads >= 1 else { throw ValidationError("--simulator-threads must be at least 1") }
        guard (1...86_400).contains(timeout) else { throw ValidationError("--timeout must be 1...86400 seconds") }
        guard (0...600).contains(quietWait) else { throw ValidationError("--quiet-wait must be 0...600 seconds") }
        if let directory {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue
            else {
                throw ValidationError("--directory: \(directory) is not a directory")
            }
        }
    }

    /// The value of a `pushgate gateway` option among `--gateway-arg`s (`--name=V` or `--name V`).
    func gatewayArgument(_ name: String) -> String? {
        var value: String? = nil
        for (index, argument) in gatewayArguments.enumerated() {
            if argument.hasPrefix(name + "=") {
                value = String(argument.dropFirst(name.count + 1))
            } else if argument == name, index + 1 < gatewayArguments.count {
                value = gatewayArguments[index + 1]
            }
        }
        return value
    }

    func binary() throws -> String {
        try PushgateBinary.locate(override: pushgateBinary, neededFor: "the gateway modes")
    }

    /// A fresh directory for one invocation's files, removed by `remove()`.
    func makeWorkDirectory() throws -> URL {
        let base = directory.map { URL(fileURLWithPath: $0) } ?? FileManager.default.temporaryDirectory
        let url = base.appendingPathComponent("pushgate-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    func waitForQuietMachine(report: Report) async {
        guard quietWait > 0 else { return }
        let busy = await ProcessMetrics.waitForQuietMachine(threshold: quietThreshold, limit: Double(quietWait))
        if let busy, busy > quietThreshold {
            report.line(
                "note: the machine was still \(Format.percent(busy)) busy after waiting \(quietWait) s; running anyway (see 'other CPU')"
            )
        }
    }
}

/// The APNs stand-in of a gateway run: our simulator as `pushgate simulate` (accept-all, no
/// per-device tracking, production environment: no `apns-unique-id` to generate), the haproxy
/// stand-in (`--rtt-ms`), or `--apns-host`.
struct StandIn: Sendable {
    var host: String
    var port: Int
    var caPath: String?
    /// Our simulator only.
    var controlPort: Int?
    /// The stand-in process we started (simulator or haproxy), for its CPU.
    var processPID: Int32?
    /// The most streams the stand-in grants a connection, when we know it.
    var maxConcurrentStreams: Int?

    var authority: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    func standInCPU() -> CPUTime? { processPID.flatMap(ProcessMetrics.processCPU) }

    func stats() -> ControlAPI.Stats? { controlPort.flatMap { try? ControlAPI.stats(port: $0) } }

    /// `simulatorLatency`: run our simulator even with `--rtt-ms`, holding every answer this long
    /// (its `latency_ms` fault), so that it counts what it accepted (e2e with FCM devices).
    static func describe(_ options: GatewayBenchOptions, simulatorLatency: Int? = nil) -> String {
        if let apnsHost = options.apnsHost { return "\(apnsHost) (external)" }
        if let rtt = options.rttMilliseconds, simulatorLatency == nil {
            return "haproxy, 1 thread (\(HAProxyStandIn.scriptPath)): 200, a fresh apns-id, every answer held \(rtt) ms"
        }
        let held = simulatorLatency.map { ", every answer held \($0) ms (POST /faults {\"latency_ms\":\($0)})" } ?? ""
        return "our simulator as a separate process (pushgate simulate --accept-all --no-device-tracking "
            + "--environment production --threads \(options.simulatorThreads) "
            + "--max-concurrent-streams \(options.maxConcurrentStreams) --fcm-port=-1)\(held)"
    }

    /// Runs `body` with a fresh stand-in that accepts provider tokens signed by `key` (written to
    /// `keyPath`), and stops it afterwards.
    static func with<Result: Sendable>(
        options: GatewayBenchOptions,
        workDirectory: URL,
        keyPath: String,
        simulatorLatency: Int? = nil,
        _ body: (StandIn) async throws -> Result
    ) async throws -> Result {
        if let apnsHost = options.apnsHost {
            let endpoint = try APNsClient.Endpoint(parsing: apnsHost)
            return try await body(StandIn(host: endpoint.host, port: endpoint.port, caPath: options.ca))
        }
        if let rtt = options.rttMilliseconds, simulatorLatency == nil {
            return try await HAProxyStandIn.with(scriptOverride: options.standInScript, rttMilliseconds: rtt) {
                haproxy in
                try await body(
                    StandIn(
                        host: haproxy.host,
                        port: haproxy.port,
                        caPath: haproxy.caPath,
                        processPID: haproxy.pid,
                        maxConcurrentStreams: 1_000
                    )
                )
            }
        }
        let caPath = workDirectory.appendingPathComponent("simulator-ca-\(UUID().uuidString).pem").path
        let arguments = [
            "simulate", "--accept-all", "--host", "127.0.0.1", "--port", "0", "--control-port", "0",
            "--threads", String(options.simulatorThreads), "--record-limit", "100", "--no-device-tracking",
            "--environment", "production", "--max-concurrent-streams", String(options.maxConcurrentStreams),
            "--log-level", "warning", "--ca-out", caPath,
            "--token-key", "\(ThrowawayKey.keyID):\(ThrowawayKey.teamID):\(keyPath)", "--fcm-port=-1",
        ]
        let child = try SimulatorProcess.start(binary: try options.binary(), arguments: arguments)
        do {
            let port = try await child.waitForPort(timeout: 30)
            let controlPort = try await child.waitForControlPort(timeout: 30)
            if let simulatorLatency, simulatorLatency > 0 {
                let faults = #"{"latency_ms":\#(simulatorLatency)}"#
                _ = try ControlAPI.requestJSON(port: controlPort, method: "POST", path: "/faults", body: faults)
            }
            let standIn = StandIn(
                host: "127.0.0.1",
                port: port,
                caPath: caPath,
                controlPort: controlPort,
                processPID: child.pid,
                maxConcurrentStreams: options.maxConcurrentStreams
            )
            let result = try await body(standIn)
            await child.stop()
            return result
        } catch {
            await child.stop()
            throw error
        }
    }
}

extension ThrowawayKey {
    /// Writes the private key (mode 0600) for `pushgate gateway --auth-key` and `simulate --token-key`.
    func write(in directory: URL) throws -> String {
        let path = directory.appendingPathComponent("bench-key.p8").path
        guard
            FileManager.default.createFile(
                atPath: path,
                contents: Data(privateKeyPEM.utf8),
                attributes: [.posixPermissions: 0o600]
            )
        else { throw BenchError("cannot write the throwaway key to \(path)") }
        return path
    }
}
