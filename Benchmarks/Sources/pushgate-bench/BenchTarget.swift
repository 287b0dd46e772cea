import APNsSimulator
import Foundation
import Logging
import PushgateCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The server a run sends to: our simulator in this process, our simulator as a child process
/// (`pushgate simulate`), or any `--apns-host`.
struct BenchTarget: Sendable {
    enum Placement: String, Sendable, Codable {
        case inProcess = "in-process"
        case process = "separate process"
        case external = "external"
    }

    var host: String
    var port: Int
    /// The CA the client trusts (nil: the system trust store).
    var caPath: String?
    var placement: Placement
    /// Our simulator's event-loop threads inside this process (in-process placement only), so
    /// that their CPU can be told apart from the client's.
    var simulatorThreads: Set<Int> = []
    /// The simulator child's pid (process placement only).
    var simulatorPID: Int32?
    /// Accepted notifications as the in-process simulator counted them.
    var simulatorAccepted: (@Sendable () -> Int)?

    /// CPU used so far by the simulator: its threads in process, or the child process.
    func simulatorCPU() -> CPUTime? {
        switch placement {
        case .inProcess: ProcessMetrics.threadsCPU(simulatorThreads)
        case .process: simulatorPID.flatMap(ProcessMetrics.processCPU)
        case .external: nil
        }
    }

    func simulatorPeakRSS() -> Int? {
        simulatorPID.flatMap { ProcessMetrics.peakRSS(pid: String($0)) }
    }
}

/// What the simulator must accept: provider tokens from our throwaway key (client runs), or
/// anything (h2load sends no credentials).
struct SimulatorSetup: Sendable {
    var threads: Int
    var tokenKey: ThrowawayKey?
    var maxConcurrentStreams: Int
}

/// A P-256 key made for one benchmark invocation and registered in the simulator: the client
/// signs provider tokens with it. Taken from a throwaway simulator CA, which is the one public
/// API here that makes a P-256 key without this target importing Crypto.
struct ThrowawayKey: Sendable {
    static let keyID = "BENCHKEY01"
    static let teamID = "BENCHTEAM1"
    let privateKeyPEM: String

    static func make() throws -> ThrowawayKey {
        let authority = try SimulatorCertificateAuthority(commonName: "pushgate-bench throwaway key")
        return ThrowawayKey(privateKeyPEM: authority.privateKeyPEM)
    }
}

enum BenchTargets {
    /// Runs `body` against a fresh target, and stops whatever was started for it.
    static func with<Result: Sendable>(
        options: BenchOptions,
        setup: SimulatorSetup,
        _ body: (BenchTarget) async throws -> Result
    ) async throws -> Result {
        if let external = options.externalEndpoint {
            return try await body(
                BenchTarget(host: external.host, port: external.port, caPath: options.ca, placement: .external)
            )
        }
        if options.simulatorProcess {
            return try await withSimulatorProcess(binary: try options.pushgateBinary(), setup: setup, body)
        }
        return try await withInProcessSimulator(setup: setup, body)
    }

    private static func withInProcessSimulator<Result: Sendable>(
        setup: SimulatorSetup,
        _ body: (BenchTarget) async throws -> Result
    ) async throws -> Result {
        var configuration = APNsSimulator.Configuration()
        configuration.handling = .acceptAll
        configuration.tracksDevices = false
        configuration.recordLimit = 100
        configuration.eventLoopThreads = setup.threads
        configuration.maxConcurrentStreams = setup.maxConcurrentStreams
        var logger = Logger(label: "pushgate.bench.simulator")
        logger.logLevel = .warning
        configuration.logger = logger
        if let key = setup.tokenKey {
            configuration.tokenKeys = [
                try ProviderTokenKey(
                    keyID: ThrowawayKey.keyID,
                    teamID: ThrowawayKey.teamID,
                    publicKeyPEM: key.privateKeyPEM
                )
            ]
        }
        // The simulator's event-loop threads are the ones that appear while it starts; they are
        // told apart from the client's (created later) by their ids.
        let before = ProcessMetrics.threadIDs()
        return try await APNsSimulator.withRunning(configuration) { running in
            let threads = ProcessMetrics.threadIDs().subtracting(before)
            let target = BenchTarget(
                host: running.host,
                port: running.port,
                caPath: running.caCertificatePath,
                placement: .inProcess,
                simulatorThreads: threads,
                simulatorAccepted: { running.stats().accepted }
            )
            return try await body(target)
        }
    }

    private static func withSimulatorProcess<Result: Sendable>(
        binary: String,
        setup: SimulatorSetup,
        _ body: (BenchTarget) async throws -> Result
    ) async throws -> Result {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "pushgate-bench-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let caPath = directory.appendingPathComponent("ca.pem").path
        var arguments = [
            "simulate", "--accept-all", "--host", "127.0.0.1", "--port", "0", "--control-port", "0",
            "--threads", String(setup.threads), "--record-limit", "100", "--no-device-tracking",
            "--max-concurrent-streams", String(setup.maxConcurrentStreams), "--log-level", "warning",
            "--ca-out", caPath, "--fcm-port=-1",
        ]
        if let key = setup.tokenKey {
            let keyPath = directory.appendingPathComponent("bench-key.pem").path
            guard
                FileManager.default.createFile(
                    atPath: keyPath,
                    contents: Data(key.privateKeyPEM.utf8),
                    attributes: [.posixPermissions: 0o600]
                )
            else { throw BenchError("cannot write the throwaway key to \(keyPath)") }
            arguments += ["--token-key", "\(ThrowawayKey.keyID):\(ThrowawayKey.teamID):\(keyPath)"]
        }
        let child = try SimulatorProcess.start(binary: binary, arguments: arguments)
        do {
            let port = try await child.waitForPort(timeout: 20)
            let target = BenchTarget(
                host: "127.0.0.1",
                port: port,
                caPath: caPath,
                placement: .process,
                simulatorPID: child.pid
            )
            let result = try await body(target)
            await child.stop()
            return result
        } catch {
            await child.stop()
            throw error
        }
    }
}

/// `pushgate simulate` as a child process. Its stdout is read until the line naming the port.
final class SimulatorProcess: Sendable {
    /// What the child printed (the first 64 KiB).
    private final class Output: Sendable {
        let text = Mutex("")
    }

    private let process: Process
    private let output: Output
    private let role: ChildProcesses.Role
    let pid: Int32

    private init(process: Process, output: Output, role: ChildProcesses.Role) {
        self.process = process
        self.output = output
        self.role = role
        self.pid = process.processIdentifier
    }

    static func start(
        binary: String,
        arguments: [String],
        role: ChildProcesses.Role = .simulator
    ) throws -> SimulatorProcess {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.standardError
        let output = Output()
        // Plain blocking reads on a thread: a readabilityHandler's dispatch source crashed libdispatch.
        pipe.fileHandleForReading.readChunksInBackground { data in
            // Bounded: only the first lines matter; the rest is drained and dropped.
            output.text.withLock { text in
                if text.utf8.count < 65_536 { text += String(decoding: data, as: UTF8.self) }
            }
        }
        do {
            try process.run()
        } catch {
            throw BenchError("cannot start \(binary): \(error)")
        }
        ChildProcesses.register(process.processIdentifier, as: role)
        return SimulatorProcess(process: process, output: output, role: role)
    }

    /// The port from `APNs simulator (HTTP/2, TLS) listening on https://HOST:PORT`.
    func waitForPort(timeout: Double) async throws -> Int {
        try await waitForPort(line: "APNs simulator (HTTP/2, TLS) listening on https://", timeout: timeout)
    }

    /// The port from `control API (HTTP/1.1) listening on http://HOST:PORT` (printed right after
    /// the APNs port, when a control port was asked for).
    func waitForControlPort(timeout: Double) async throws -> Int {
        try await waitForPort(line: "control API (HTTP/1.1) listening on http://", timeout: timeout)
    }

    /// The port at the end of the line that starts with `prefix` (`…HOST:PORT`).
    func waitForPort(line prefix: String, timeout: Double) async throws -> Int {
        let authority = try await waitForValue(line: prefix, timeout: timeout)
        guard let colon = authority.lastIndex(of: ":"), let port = Int(authority[authority.index(after: colon)...])
        else { throw BenchError("pushgate simulate printed no port after '\(prefix)': \(authority)") }
        return port
    }

    /// The rest of the first line that starts with `prefix` (the APNs and FCM simulators start
    /// concurrently, so their lines come in either order; each is found by how it begins).
    func waitForValue(line prefix: String, timeout: Double) async throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let text = output.text.withLock { $0 }
            for line in text.split(separator: "\n") where line.hasPrefix(prefix) {
                return line.dropFirst(prefix.count).trimmingCharacters(in: .whitespaces)
            }
            guard process.isRunning else {
                throw BenchError(
                    "pushgate simulate exited (status \(process.terminationStatus)) before printing '\(prefix)'"
                )
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw BenchError("pushgate simulate printed no '\(prefix)' line within \(Int(timeout)) s")
    }

    /// SIGTERM (a graceful stop), then SIGKILL after 5 s.
    func stop() async {
        if process.isRunning { process.terminate() }
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        if process.isRunning { kill(pid, SIGKILL) }
        ChildProcesses.unregister(role)
    }
}

/// Children to take down when the benchmark is interrupted (Ctrl-C, SIGTERM), so that no
/// simulator or h2load outlives it. Atomics, because a signal handler reads them.
enum ChildProcesses {
    enum Role { case simulator, fcmSimulator, webPushSimulator, tool, gateway }

    private static let simulator = Atomic<Int32>(0)
    private static let fcmSimulator = Atomic<Int32>(0)
    private static let webPushSimulator = Atomic<Int32>(0)
    private static let tool = Atomic<Int32>(0)
    private static let gateway = Atomic<Int32>(0)

    static func register(_ pid: Int32, as role: Role) {
        switch role {
        case .simulator: simulator.store(pid, ordering: .sequentiallyConsistent)
        case .fcmSimulator: fcmSimulator.store(pid, ordering: .sequentiallyConsistent)
        case .webPushSimulator: webPushSimulator.store(pid, ordering: .sequentiallyConsistent)
        case .tool: tool.store(pid, ordering: .sequentiallyConsistent)
        case .gateway: gateway.store(pid, ordering: .sequentiallyConsistent)
        }
    }

    static func unregister(_ role: Role) {
        register(0, as: role)
    }

    /// SIGINT/SIGTERM: kill the registered children, then exit.
    static func installSignalHandlers() {
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber) { received in
                ChildProcesses.killChildren()
                // write(2) is async-signal-safe; the text is a static C string.
                let message: StaticString = "pushgate-bench: stopped by a signal\n"
                _ = write(2, message.utf8Start, message.utf8CodeUnitCount)
                _exit(128 + received)
            }
        }
    }

    private static func killChildren() {
        // Each by name (an array of atomics cannot be made, and would allocate in a signal handler).
        terminate(simulator.load(ordering: .sequentiallyConsistent))
        terminate(fcmSimulator.load(ordering: .sequentiallyConsistent))
        terminate(webPushSimulator.load(ordering: .sequentiallyConsistent))
        terminate(tool.load(ordering: .sequentiallyConsistent))
        terminate(gateway.load(ordering: .sequentiallyConsistent))
    }

    private static func terminate(_ pid: Int32) {
        if pid > 0 { kill(pid, SIGTERM) }
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
