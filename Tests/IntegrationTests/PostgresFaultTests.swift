import APNsSimulator
import Foundation
import PushgateCore
import PushgatePostgres
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The `pushgate` daemon on PostgreSQL while the database fails under it, mid-broadcast: the server
/// restarts, every connection of pushgate's is terminated, or the network to it becomes a black hole
/// for 10 s. Each time the process stays up, every device is reached (nothing accepted is lost) and the
/// next notification goes out.
///
/// Each test runs its own throwaway cluster (`scripts/postgres-test-cluster.sh`), so that restarting
/// it cannot disturb the other PostgreSQL tests running at the same time.
///
/// The stall after a restart or terminated connections (issue 13: postgres-nio dropped a query written to
/// a closed connection; docs/reliability.md, "PostgreSQL faults") is fixed, so these run whenever
/// `PUSHGATE_TEST_POSTGRES_URL` is set. The black hole passes since the store's query deadline, but takes
/// about a minute (the hole, then the deadline and reconnects), so it runs only when
/// `PUSHGATE_TEST_POSTGRES_FAULTS=1` asks for it. Its daemon's `query_timeout` is 5 s, or
/// `PUSHGATE_TEST_QUERY_TIMEOUT` seconds (`0`: none, the behaviour before the fix, which never recovers).
@Suite(
    "PostgreSQL faults mid-broadcast",
    .serialized,
    .timeLimit(.minutes(10)),
    .enabled(
        if: PostgresTestDatabase.isAvailable,
        "PUSHGATE_TEST_POSTGRES_URL is not set: no PostgreSQL server to test against"
    ),
    .enabled(
        if: FileManager.default.isExecutableFile(atPath: GatewayCrashTests.gatewayBinary),
        "needs the pushgate binary built next to the tests"
    )
)
struct PostgresFaultTests {
    static let devices = 20_000
    static let queryTimeout: Duration? = {
        let seconds = Int(ProcessInfo.processInfo.environment["PUSHGATE_TEST_QUERY_TIMEOUT"] ?? "5") ?? 5
        return seconds == 0 ? nil : .seconds(seconds)
    }()
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    enum Fault {
        case restart
        case terminateConnections
        case blackHole(seconds: Int)
    }

    @Test("the server restarts (pg_ctl restart -m fast) mid-broadcast: nothing lost, the gateway stays up")
    func serverRestart() async throws {
        try await broadcast(through: .restart)
    }

    @Test("every connection of pushgate's is terminated (pg_terminate_backend) mid-broadcast: nothing lost")
    func connectionsTerminated() async throws {
        try await broadcast(through: .terminateConnections)
    }

    @Test(
        "the database is a black hole for 10 s mid-broadcast: nothing lost, the gateway stays up",
        .enabled(
            if: ProcessInfo.processInfo.environment["PUSHGATE_TEST_POSTGRES_FAULTS"] == "1",
            "PUSHGATE_TEST_POSTGRES_FAULTS=1 runs it (about a minute)"
        )
    )
    func blackHole() async throws {
        try await broadcast(through: .blackHole(seconds: 10))
    }

    /// The HTTP API's port, from the daemon's `HTTP API listening` line (it binds port 0).
    static func httpPort(of daemon: MultiInstanceTests.Instance) throws -> Int {
        let line = daemon.output.text.split(separator: "\n").first { $0.contains("HTTP API listening") } ?? ""
        guard let range = line.range(of: #"http\.port=(\d+)"#, options: .regularExpression),
            let port = Int(line[range].dropFirst("http.port=".count))
        else { throw ExternalTools.ToolError("no HTTP port in the daemon's log") }
        return port
    }

    func broadcast(through fault: Fault) async throws {
        let cluster = try ThrowawayCluster()
        defer { cluster.stop() }
        let database = try PostgresTestDatabase(url: cluster.url)
        try await database.register(count: Self.devices, in: "all", token: MultiInstanceTests.token)
        let proxy: BlackHoleProxy? =
            if case .blackHole = fault { try BlackHoleProxy(upstreamPort: database.configuration.port) } else { nil }
        defer { proxy?.stop() }
        let daemonDatabase =
            proxy.map { database.reached(throughPort: $0.port, queryTimeout: Self.queryTimeout) } ?? database

        try await MultiInstanceTests.withSimulator(latencyMilliseconds: 20) { simulator, keyPaths in
            let (name, keyID) = MultiInstanceTests.instances[0]
            let daemon = try MultiInstanceTests.start(
                name,
                keyID: keyID,
                keyPath: keyPaths[keyID]!,
                database: daemonDatabase,
                simulator: simulator,
                chunkSize: 2_000,
                leaseSeconds: 30
            )
            defer { kill(daemon.process.processIdentifier, SIGKILL) }
            try await MultiInstanceTests.waitUntilReady(daemon)
            try UDPSender(port: daemon.notificationPort).send(MultiInstanceTests.broadcast)
            try await eventually("the broadcast is under way", timeout: .seconds(120)) {
                simulator.stats().accepted >= 2_000
            }

            switch fault {
            case .restart:
                try cluster.restart()
            case .terminateConnections:
                let terminated = try cluster.psql(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = 'pushgate' AND pid <> pg_backend_pid()"
                )
                #expect(Int(terminated) ?? 0 >= 1, "at least one of pushgate's connections was terminated")
            case .blackHole(let seconds):
                let hole = ContinuousClock.now
                try proxy!.blackHole(true)
                // While the database does not answer, /readyz says so (promptly, not at the store's deadline).
                let http = HTTPTestClient(port: try Self.httpPort(of: daemon))
                try await eventually("/readyz is 503 in the black hole", timeout: .seconds(seconds)) {
                    let response = try await http.send("GET", "/readyz")
                    let code = (response.json["error"] as? [String: Any])?["code"] as? String
                    return response.status == 503 && code == "store_unavailable"
                }
                // The fault's length, not a synchronisation: the network is gone this long.
                try await Task.sleep(until: hole + .seconds(seconds))
                #expect(daemon.process.isRunning, "the gateway is still running while the database is unreachable")
                try proxy!.blackHole(false)
                let stats = try proxy!.stats()
                #expect(stats.dead >= 1, "connections died in the hole: \(stats)")
                try await eventually("/readyz is 200 again", timeout: .seconds(120)) {
                    try await http.send("GET", "/readyz").status == 200
                }
            }
            let atFault = simulator.stats().devices

            do {
                try await eventually("every device reached", timeout: .seconds(300)) {
                    simulator.stats().devices >= Self.devices
                }
                try await eventually("the request is reported done", timeout: .seconds(120)) {
                    daemon.output.text.contains("notification request done")
                }
            } catch {
                if let path = ProcessInfo.processInfo.environment["PUSHGATE_TEST_DAEMON_LOG"] {
                    try? daemon.output.text.write(toFile: path, atomically: true, encoding: .utf8)
                }
                Issue.record(
                    "\(error): \(simulator.stats().devices) devices reached; the log ends with:\n\(daemon.output.text.suffix(4_000))"
                )
                return
            }
            #expect(daemon.process.isRunning, "the gateway survived the fault")
            if case .blackHole = fault {
                #expect(
                    daemon.output.text.contains("PostgreSQL did not answer a query in time"),
                    "the query deadline ended queries on dead connections"
                )
            }
            let stats = simulator.stats()
            print(
                "postgres fault \(fault): \(atFault) devices reached at the fault, \(stats.devices) in the end, \(stats.duplicates) duplicates"
            )
            #expect(stats.devices == Self.devices, "nothing lost")

            // The gateway still takes and delivers new work after the fault.
            let next =
                #"{"devices": ["\#(MultiInstanceTests.token(7))"], "type": "normal", "payload": {"aps": {"alert": "after"}}}"#
            let before = stats.accepted
            try UDPSender(port: daemon.notificationPort).send(next)
            try await eventually("the next notification goes out", timeout: .seconds(120)) {
                simulator.stats().accepted > before
            }
            #expect(daemon.process.isRunning)
        }
    }
}

extension PostgresTestDatabase {
    /// A fresh schema on the server at `url` (not the one in the environment).
    init(url: String) throws {
        var configuration = try PostgresStore.Configuration(url: url)
        configuration.schema =
            "fault_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(20)
        configuration.listensForWork = false
        self.init(exactly: configuration)
    }

    private init(exactly configuration: PostgresStore.Configuration) {
        self.configuration = configuration
    }

    /// The same schema, reached through another port on loopback (a proxy in front of the server).
    func reached(throughPort port: Int, queryTimeout: Duration?) -> PostgresTestDatabase {
        var configuration = self.configuration
        configuration.port = port
        configuration.queryTimeout = queryTimeout
        return PostgresTestDatabase(exactly: configuration)
    }
}

/// A PostgreSQL cluster of the test's own, from `scripts/postgres-test-cluster.sh`.
struct ThrowawayCluster {
    let url: String
    let root: String
    static var script: String {
        PostgresFaultTests.repository.appendingPathComponent("scripts/postgres-test-cluster.sh").path
    }

    init() throws {
        let (status, output) = try Self.script(["start"])
        var exports: [String: String] = [:]
        for line in output.split(separator: "\n") where line.hasPrefix("export ") {
            let assignment = line.dropFirst("export ".count)
            guard let equals = assignment.firstIndex(of: "=") else { continue }
            exports[String(assignment[..<equals])] = String(assignment[assignment.index(after: equals)...])
        }
        guard status == 0, let url = exports["PUSHGATE_TEST_POSTGRES_URL"],
            let root = exports["PUSHGATE_TEST_POSTGRES_ROOT"]
        else {
            throw ExternalTools.ToolError("could not start a PostgreSQL cluster: \(output)")
        }
        self.url = url
        self.root = root
    }

    func restart() throws {
        let (status, output) = try Self.script(["restart", root])
        guard status == 0 else { throw ExternalTools.ToolError("pg_ctl restart failed: \(output)") }
    }

    func psql(_ sql: String) throws -> String {
        let (status, output) = try ExternalTools.run(
            "psql",
            [url, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql]
        )
        guard status == 0 else { throw ExternalTools.ToolError("psql failed: \(output)") }
        return output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func stop() {
        _ = try? Self.script(["stop", root])
    }

    /// Runs the cluster script with `posix_spawn` and `waitpid`, its output in a file. Foundation's
    /// `Process` never sees this script end (`waitUntilExit` hangs once `pg_ctl` has left a server
    /// running in the background), so it is not used here.
    static func script(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let directory = try TemporaryDirectory()
        let outputPath = directory.path("cluster-script.out")
        let quoted = ([script] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let argv = ["/bin/bash", "-c", "/bin/bash \(quoted.joined(separator: " ")) > '\(outputPath)' 2>&1 < /dev/null"]
        let cArguments = argv.map { strdup($0) } + [nil]
        defer { for argument in cArguments { free(argument) } }
        // The server this script leaves running must not hold any of our descriptors (see
        // `SpawnFileActions`): it made a parallel test's daemon look alive long after it had exited.
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        SpawnFileActions.closeInheritedDescriptors(&actions)
        var pid: pid_t = 0
        guard posix_spawn(&pid, "/bin/bash", &actions, nil, cArguments, environ) == 0 else {
            throw ExternalTools.ToolError("could not start \(script)")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1, errno == EINTR {}
        let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        return ((status >> 8) & 0xff, output)
    }
}

/// `scripts/tcp-blackhole-proxy.py` in front of the database, driven by commands on its standard input
/// (it exits when that ends, so it never outlives the test).
final class BlackHoleProxy: Sendable {
    let process: SpawnedProcess
    let port: Int
    private let commands: FileHandle
    private let answers: LineReader

    /// What the proxy counted: connections accepted, those that died in the hole, bytes discarded.
    struct Stats {
        var connections: Int
        var dead: Int
        var discarded: Int
    }

    init(upstreamPort: Int) throws {
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: ExternalTools.path(of: "python3") ?? "/usr/bin/python3")
        process.arguments = [
            PostgresFaultTests.repository.appendingPathComponent("scripts/tcp-blackhole-proxy.py").path, "127.0.0.1",
            "\(upstreamPort)",
        ]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let answers = LineReader(output.fileHandleForReading)
        let words = try Self.words(of: answers.next())
        guard words.count == 2, words[0] == "listening", let port = Int(words[1]) else {
            throw ExternalTools.ToolError("unexpected proxy output: \(words)")
        }
        self.process = process
        self.commands = input.fileHandleForWriting
        self.answers = answers
        self.port = port
    }

    /// Starts (`true`) or ends the black hole; returns once the proxy has acknowledged it.
    func blackHole(_ on: Bool) throws {
        try expect(command(on ? "hole" : "pass"), on ? "hole on" : "hole off")
    }

    func stats() throws -> Stats {
        let words = try Self.words(of: command("stats"))
        guard words.count == 4, words[0] == "stats", let connections = Int(words[1]), let dead = Int(words[2]),
            let discarded = Int(words[3])
        else { throw ExternalTools.ToolError("unexpected proxy answer: \(words)") }
        return Stats(connections: connections, dead: dead, discarded: discarded)
    }

    /// Ends the proxy (closing its input), dropping every connection.
    func stop() {
        try? commands.close()
    }

    private func command(_ text: String) throws -> String {
        try commands.write(contentsOf: Data((text + "\n").utf8))
        return try answers.next()
    }

    private func expect(_ answer: String, _ expected: String) throws {
        guard answer == expected else {
            throw ExternalTools.ToolError("the proxy answered \"\(answer)\", not \"\(expected)\"")
        }
    }

    private static func words(of line: String) -> [Substring] {
        line.split(whereSeparator: \.isWhitespace)
    }
}

/// The lines a child process writes (it answers each command at once).
final class LineReader: Sendable {
    private let handle: FileHandle
    private let unread = Mutex<Data>(Data())

    init(_ handle: FileHandle) { self.handle = handle }

    func next() throws -> String {
        while true {
            let line: String? = unread.withLock { buffer in
                guard let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
                defer { buffer.removeSubrange(buffer.startIndex...newline) }
                return String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
            }
            if let line { return line }
            guard let chunk = handle.readAvailableRetryingInterrupts(), !chunk.isEmpty else {
                throw ExternalTools.ToolError("the process ended its output")
            }
            unread.withLock { $0.append(chunk) }
        }
    }
}
