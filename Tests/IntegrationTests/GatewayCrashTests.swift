import APNsSimulator
import Crypto
import Foundation
import Logging
import PushgateCore
import PushgateDispatch
import PushgateSQLite
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The `pushgate` daemon as a child process, killed mid-broadcast and restarted on the same
/// database: nothing accepted is lost.
@Suite("Gateway crash and shutdown recovery", .serialized, .timeLimit(.minutes(5)))
struct GatewayCrashTests {
    static let devices = 20_000
    static let keyID = "KEY1234567"
    static let teamID = "TEAM123456"

    /// The `pushgate` binary next to the test bundle (SwiftPM builds both into the same folder).
    static var gatewayBinary: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("pushgate")
            .path
    }

    static func token(_ index: Int) -> String { String(format: "%064x", 0x5eed_0000 + index) }

    /// A database with `devices` devices in group "all", written straight through the store.
    static func prepareDatabase(at path: String) async throws {
        let store = try SQLiteStore(path: path, logger: Logger(label: "test.store"))
        let now = Date()
        for start in stride(from: 0, to: devices, by: 5_000) {
            let batch = try (start..<min(start + 5_000, devices)).map {
                Registration(token: try DeviceToken(hex: token($0)), group: "all", at: now)
            }
            _ = try await store.register(batch: batch)
        }
        try store.close()
    }

    struct Daemon {
        let process: SpawnedProcess
        let output: OutputCollector
    }

    struct ReadyDaemon {
        let process: SpawnedProcess
        let output: OutputCollector
        /// Read from its `pushgate ready` line: the daemon binds port 0, so no other test can hold it.
        let notificationPort: Int
    }

    /// Starts `pushgate -f` against the simulator and waits until it says it is ready.
    static func startDaemon(
        database: String,
        simulator: RunningAPNsSimulator,
        keyPath: String
    ) async throws -> ReadyDaemon {
        let daemon = try launchDaemon(database: database, simulator: simulator, keyPath: keyPath)
        let (process, output) = (daemon.process, daemon.output)
        try await eventually("the daemon is ready", timeout: .seconds(60)) {
            if !process.isRunning { throw ExternalTools.ToolError("pushgate exited early:\n\(output.text)") }
            return output.text.contains("pushgate ready")
        }
        guard let port = notificationPort(in: output.text) else {
            throw ExternalTools.ToolError("no udp.notification port in the ready line:\n\(output.text)")
        }
        return ReadyDaemon(process: process, output: output, notificationPort: port)
    }

    /// The port of `udp.notification=[IPv4]127.0.0.1/127.0.0.1:PORT` on the `pushgate ready` line.
    static func notificationPort(in log: String) -> Int? {
        guard let line = log.split(separator: "\n").first(where: { $0.contains("pushgate ready") }),
            let field = line.split(separator: " ").first(where: { $0.hasPrefix("udp.notification=") }),
            let colon = field.lastIndex(of: ":")
        else { return nil }
        return Int(field[field.index(after: colon)...])
    }

    /// Starts `pushgate -f` against the simulator without waiting for it. Its UDP ports are 0: the kernel
    /// picks them, and ``startDaemon(database:simulator:keyPath:)`` reads them from the ready line.
    static func launchDaemon(database: String, simulator: RunningAPNsSimulator, keyPath: String) throws -> Daemon {
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: gatewayBinary)
        process.arguments =
            [
                "-f", "-d", database, "-l", "127.0.0.1", "-g", "0", "-n", "0",
                "--apns-host", "127.0.0.1:\(simulator.port)", "--ca", simulator.caCertificatePath!, "--auth-key",
                keyPath,
                "--key-id", keyID, "--team-id", teamID, "--topic", "com.example.pushgate", "--max-connections", "1",
                "--http-port", "0",
            ] + (ProcessInfo.processInfo.environment["PUSHGATE_TEST_LOG"].map { ["--log-level", $0] } ?? [])
        let output = OutputCollector()
        let pipe = Pipe()
        process.standardError = pipe
        process.standardOutput = FileHandle.nullDevice
        pipe.fileHandleForReading.readChunksInBackground({ output.append($0) }, onEnd: { output.end() })
        try process.run()
        return Daemon(process: process, output: output)
    }

    /// A database of `devices` devices in group "all", and a slow simulator (50 streams, 10 ms each: about
    /// 5,000/s, so that an interruption lands mid-broadcast) that knows the key at `keyPath`.
    static func withPreparedDatabase<T: Sendable>(
        _ body: (_ database: String, _ simulator: RunningAPNsSimulator, _ keyPath: String) async throws -> T
    ) async throws -> T {
        let directory = try TemporaryDirectory()
        let database = directory.path("gateway.db")
        try await prepareDatabase(at: database)
        let key = P256.Signing.PrivateKey()
        try key.pemRepresentation.write(toFile: directory.path("AuthKey.p8"), atomically: true, encoding: .utf8)

        var configuration = APNsSimulator.Configuration()
        configuration.tokenKeys = [ProviderTokenKey(keyID: keyID, teamID: teamID, publicKey: key.publicKey)]
        configuration.maxConcurrentStreams = 50
        configuration.faults.latencyMilliseconds = 10
        configuration.recordLimit = 0
        configuration.logger = TestLogger.make("simulator")
        return try await APNsSimulator.withRunning(configuration) { simulator in
            try await body(database, simulator, directory.path("AuthKey.p8"))
        }
    }

    /// Runs a broadcast, interrupts the daemon with `signal` once `interruptAfter` devices were
    /// reached, restarts it and waits until every device has the notification.
    static func interruptedBroadcast(
        signal: Int32,
        interruptAfter: Int
    ) async throws -> (atInterrupt: Int, total: Int, exitSeconds: Double) {
        try await withPreparedDatabase { database, simulator, keyPath in
            let first = try await startDaemon(database: database, simulator: simulator, keyPath: keyPath)
            try UDPSender(port: first.notificationPort).send(
                #"{"groups": ["all"], "type": "normal", "payload": {"aps": {"alert": "broadcast"}}}"#
            )
            try await eventually("broadcast under way") { simulator.stats().accepted >= interruptAfter }
            let interruptedAt = ContinuousClock.now
            kill(first.process.processIdentifier, signal)
            try await eventually("the daemon exited", timeout: .seconds(30)) { !first.process.isRunning }
            let exitSeconds =
                Double((ContinuousClock.now - interruptedAt).components.attoseconds) / 1e18
                + Double((ContinuousClock.now - interruptedAt).components.seconds)
            let atInterrupt = simulator.stats().accepted
            if ProcessInfo.processInfo.environment["PUSHGATE_TEST_LOG"] != nil { print(first.output.text) }
            #expect(atInterrupt < devices, "the interruption came too late to test anything")

            let second = try await startDaemon(database: database, simulator: simulator, keyPath: keyPath)
            defer { kill(second.process.processIdentifier, SIGKILL) }
            try await eventually("every device reached after the restart", timeout: .seconds(180)) {
                simulator.stats().devices >= devices
            }
            // Let the last answers of the restarted daemon land before counting duplicates.
            try await eventually("restarted daemon finished", timeout: .seconds(60)) {
                second.output.text.contains("notification request done")
            }
            return (atInterrupt, simulator.stats().accepted, exitSeconds)
        }
    }

    @Test(
        "SIGKILL mid-broadcast to 20,000 devices, restart: every device reached, duplicates bounded by the in-flight window",
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: GatewayCrashTests.gatewayBinary),
            "needs the pushgate binary built next to the tests"
        )
    )
    func killMidBroadcast() async throws {
        let (atKill, total, _) = try await Self.interruptedBroadcast(signal: SIGKILL, interruptAfter: 4_000)
        let duplicates = total - Self.devices
        print(
            "crash test: \(Self.devices) devices, \(atKill) reached before SIGKILL, \(total) deliveries in all, \(duplicates) duplicates"
        )
        // The daemon's defaults: 2,000 in flight, outcomes recorded at least every 4,000 or 100 ms.
        // Sent but unrecorded when killed: at most what was in flight (the budget's ceiling: 2,000 with
        // the transport shim) and the outcomes of one progress batch not yet written.
        let window = 2_000 + Dispatcher.Configuration(instanceID: InstanceID("window")).progressBatch
        #expect(duplicates <= window, "duplicates beyond the in-flight and unrecorded window")
    }

    @Test(
        "a second process on the same SQLite file is refused at once (exit 78); the first serves on",
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: GatewayCrashTests.gatewayBinary),
            "needs the pushgate binary built next to the tests"
        )
    )
    func secondProcessOnOneFileRefused() async throws {
        try await Self.withPreparedDatabase { database, simulator, keyPath in
            let first = try await Self.startDaemon(database: database, simulator: simulator, keyPath: keyPath)
            defer { kill(first.process.processIdentifier, SIGKILL) }
            let second = try Self.launchDaemon(database: database, simulator: simulator, keyPath: keyPath)
            defer { kill(second.process.processIdentifier, SIGKILL) }
            // Its exit comes before the last of its stderr is read from the pipe: wait for both.
            try await eventually("the second process gives up", timeout: .seconds(30)) {
                !second.process.isRunning && second.output.isComplete
            }
            #expect(second.process.terminationStatus == 78)
            #expect(second.output.text.contains("another pushgate process uses it"))
            #expect(!second.output.text.contains("pushgate ready"))
            #expect(first.process.isRunning)
        }
    }

    @Test(
        "SIGTERM mid-broadcast: the daemon exits within its grace period and the rest is delivered after restart",
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: GatewayCrashTests.gatewayBinary),
            "needs the pushgate binary built next to the tests"
        )
    )
    func terminateMidBroadcast() async throws {
        let (atTerm, total, exitSeconds) = try await Self.interruptedBroadcast(signal: SIGTERM, interruptAfter: 3_000)
        let duplicates = total - Self.devices
        print(
            "shutdown test: exited \(String(format: "%.2f", exitSeconds)) s after SIGTERM, \(atTerm) reached before, \(total) deliveries in all, \(duplicates) duplicates"
        )
        #expect(exitSeconds < 15, "the dispatcher's grace is 5 s and the client's 10 s")
        #expect(duplicates == 0, "a graceful stop records every answer it got")
    }
}

/// Collects a child's output as it arrives.
final class OutputCollector: @unchecked Sendable {
    // @unchecked: `data` is only touched under `lock`.
    private let lock = NSLock()
    private var data = Data()

    private var ended = false

    func append(_ chunk: Data) {
        lock.lock()
        data.append(chunk)
        lock.unlock()
    }

    /// The writer's end is closed and everything it wrote was read (see `readChunksInBackground`).
    func end() {
        lock.lock()
        ended = true
        lock.unlock()
    }

    /// True once `end()` was called: a process that exited may still have output in the pipe until then.
    var isComplete: Bool {
        lock.lock()
        defer { lock.unlock() }
        return ended
    }

    var text: String {
        lock.lock()
        defer { lock.unlock() }
        return String(decoding: data, as: UTF8.self)
    }
}
