import Foundation
import PushgateCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

extension GatewayLaunch {
    /// A gateway of the bench's options against `haproxy`.
    init(
        binary: String,
        databasePath: String,
        standIn haproxy: HAProxyStandIn,
        authKeyPath: String,
        options: GatewayBenchOptions
    ) {
        self.init(
            binary: binary,
            databasePath: databasePath,
            apnsHost: "\(haproxy.host):\(haproxy.port)",
            caPath: haproxy.caPath,
            authKeyPath: authKeyPath,
            topic: options.topic,
            extraArguments: options.gatewayArguments
        )
    }
}

/// How the gateway child reaches its APNs stand-in, and with which credentials.
struct GatewayLaunch: Sendable {
    var binary: String
    var databasePath: String
    /// `HOST:PORT` of the stand-in.
    var apnsHost: String
    var caPath: String?
    /// Token authentication with the throwaway key (our simulator knows its public half; any
    /// other stand-in must accept any provider token).
    var authKeyPath: String
    var topic: String
    var logLevel: String = "info"
    /// The HTTP API's port: -1 none, 0 any free one (read from the ready line).
    var httpPort: Int = -1
    /// Appended as given (`--gateway-arg=--max-streams=1000`).
    var extraArguments: [String] = []
    /// A configuration file naming several apps (``configuration(apps:)``): the single app's flags
    /// (`--apns-host`, `--auth-key`, `--topic`...) are left out, the file says them per app.
    var configurationPath: String? = nil

    var arguments: [String] {
        var arguments = [
            "gateway", "-f", "-d", databasePath, "-l", "127.0.0.1", "-g", "0", "-n", "0",
            "--http-port=\(httpPort)", "--log-level", logLevel,
        ]
        if let configurationPath { return arguments + ["--config", configurationPath] + extraArguments }
        arguments += [
            "--apns-host", apnsHost, "--auth-key", authKeyPath, "--key-id", ThrowawayKey.keyID, "--team-id",
            ThrowawayKey.teamID, "--topic", topic,
        ]
        if let caPath { arguments += ["--ca", caPath] }
        return arguments + extraArguments
    }

    /// A YAML configuration with `apps`, each against the same stand-in with the throwaway key (apps of one
    /// team share its provider token), topic `TOPIC.APP`.
    func configuration(apps: [String]) -> String {
        var yaml = "apps: [\(apps.joined(separator: ", "))]\napp:\n"
        for app in apps {
            yaml += "  \(app):\n    topic: \(topic).\(app)\n    apnsHost: \"\(apnsHost)\"\n"
            if let caPath { yaml += "    ca: \(caPath)\n" }
            yaml +=
                "    token: {keyFile: \(authKeyPath), keyId: \(ThrowawayKey.keyID), teamId: \(ThrowawayKey.teamID)}\n"
        }
        return yaml
    }
}

/// One line of the gateway's log, with the time this process read it.
struct GatewayLogLine: Sendable {
    var text: String
    /// When the bench read the line: an upper bound of when the gateway wrote it.
    var arrivedAt: ContinuousClock.Instant

    /// `key=value` from the line's metadata (swift-log's stream format: `key=value` pairs separated
    /// by spaces, then `[Module] message`).
    func metadata(_ key: String) -> String? {
        for field in text.split(separator: " ") where field.hasPrefix(key + "=") {
            return String(field.dropFirst(key.count + 1))
        }
        return nil
    }
}

/// The gateway's stderr, split into lines as it arrives. Keeps the lines the benchmarks look for
/// and the last few of any kind (for a diagnosis when the gateway exits early); forwards warnings
/// and errors to our stderr.
final class GatewayLog: Sendable {
    private struct State {
        var partial = ""
        var kept: [GatewayLogLine] = []
        var recent: [String] = []
        /// Lines saying a request is done, counted as they arrive: the mixed-traffic modes wait for
        /// tens of thousands of them, and counting the kept lines again on each poll would cost this
        /// process a core.
        var doneLines = 0
    }

    private static let keptMarkers = ["pushgate ready", "notification request", "UDP ingress stopped"]
    private static let forwardedLevels = [" warning ", " error ", " critical "]
    private let state = Mutex(State())

    func received(_ data: Data, at instant: ContinuousClock.Instant) {
        let forwarded = state.withLock { state -> [String] in
            state.partial += String(decoding: data, as: UTF8.self)
            var forwarded: [String] = []
            while let newline = state.partial.firstIndex(of: "\n") {
                let line = String(state.partial[..<newline])
                state.partial.removeSubrange(...newline)
                if Self.keptMarkers.contains(where: { line.contains($0) }) {
                    if line.hasSuffix("notification request done") { state.doneLines += 1 }
                    state.kept.append(GatewayLogLine(text: line, arrivedAt: instant))
                }
                if Self.forwardedLevels.contains(where: { line.contains($0) }) { forwarded.append(line) }
                state.recent.append(line)
                if state.recent.count > 40 { state.recent.removeFirst(state.recent.count - 40) }
            }
            return forwarded
        }
        for line in forwarded {
            FileHandle.standardError.write(Data("gateway: \(line)\n".utf8))
        }
    }

    /// Kept lines containing `marker`.
    func lines(containing marker: String) -> [GatewayLogLine] {
        state.withLock { $0.kept.filter { $0.text.contains(marker) } }
    }

    func count(containing marker: String) -> Int {
        state.withLock { $0.kept.reduce(0) { $0 + ($1.text.contains(marker) ? 1 : 0) } }
    }

    var recent: [String] { state.withLock { $0.recent } }

    /// Lines ending `notification request done` so far.
    var doneLines: Int { state.withLock { $0.doneLines } }
}

/// `pushgate gateway -f` as a child process. Its CPU and peak RSS come from `/proc/PID/stat` and
/// `/proc/PID/status`, so they are the gateway's alone.
final class GatewayProcess: Sendable {
    struct Ports: Sendable {
        var registration: Int
        var notification: Int
        /// The HTTP API's, when it listens.
        var http: Int?
    }

    private let process: Process
    let log: GatewayLog
    let pid: Int32

    private init(process: Process, log: GatewayLog) {
        self.process = process
        self.log = log
        self.pid = process.processIdentifier
    }

    static func start(_ launch: GatewayLaunch) throws -> GatewayProcess {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: launch.binary)
        process.arguments = launch.arguments
        process.standardOutput = FileHandle.nullDevice
        let pipe = Pipe()
        process.standardError = pipe
        let log = GatewayLog()
        // Plain blocking reads on a thread: a readabilityHandler's dispatch source crashed libdispatch.
        pipe.fileHandleForReading.readChunksInBackground { data in
            log.received(data, at: .now)
        }
        do {
            try process.run()
        } catch {
            throw BenchError("cannot start \(launch.binary): \(error)")
        }
        ChildProcesses.register(process.processIdentifier, as: .gateway)
        return GatewayProcess(process: process, log: log)
    }

    var isRunning: Bool { process.isRunning }

    /// The UDP ports from the `pushgate ready` line (`udp.registration=[IPv4]127.0.0.1/127.0.0.1:PORT`).
    func waitForReady(timeout: Double) async throws -> Ports {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while ContinuousClock.now < deadline {
            if let ready = log.lines(containing: "pushgate ready").first {
                guard let registration = ready.metadata("udp.registration").flatMap(Self.port),
                    let notification = ready.metadata("udp.notification").flatMap(Self.port)
                else { throw BenchError("cannot read the UDP ports from the gateway's line: \(ready.text)") }
                return Ports(
                    registration: registration,
                    notification: notification,
                    http: ready.metadata("http.port").flatMap { Int($0) }
                )
            }
            try checkAlive("before it was ready")
            try await Task.sleep(for: .milliseconds(10))
        }
        throw BenchError(
            "the gateway was not ready within \(Int(timeout)) s; its last lines:\n\(log.recent.joined(separator: "\n"))"
        )
    }

    /// Waits until at least `count` kept lines contain `marker`; returns them.
    func waitForLines(containing marker: String, count: Int, timeout: Double) async throws -> [GatewayLogLine]? {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while ContinuousClock.now < deadline {
            let lines = log.lines(containing: marker)
            if lines.count >= count { return lines }
            try checkAlive("while the bench waited for '\(marker)'")
            try await Task.sleep(for: .milliseconds(2))
        }
        return nil
    }

    func checkAlive(_ when: String) throws {
        guard process.isRunning else {
            throw BenchError(
                "the gateway exited (status \(process.terminationStatus)) \(when); its last lines:\n\(log.recent.joined(separator: "\n"))"
            )
        }
    }

    func cpu() -> CPUTime? { ProcessMetrics.processCPU(pid: pid) }

    /// `VmHWM`: the gateway's peak resident set since it started.
    func peakRSS() -> Int? { ProcessMetrics.peakRSS(pid: String(pid)) }

    /// SIGTERM (the gateway drains and stops), then SIGKILL after `grace` seconds. Returns the exit
    /// status, nil when it had to be killed.
    @discardableResult
    func stop(grace: Double = 15) async -> Int32? {
        if process.isRunning { process.terminate() }
        let deadline = ContinuousClock.now + .seconds(grace)
        while process.isRunning && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        var status: Int32? = nil
        if process.isRunning {
            kill(pid, SIGKILL)
            process.waitUntilExit()
        } else {
            status = process.terminationStatus
        }
        ChildProcesses.unregister(.gateway)
        return status
    }

    private static func port(_ addresses: String) -> Int? {
        // One or more addresses, comma-separated; the same port on each.
        guard let first = addresses.split(separator: ",").first, let colon = first.lastIndex(of: ":") else {
            return nil
        }
        return Int(first[first.index(after: colon)...])
    }
}
