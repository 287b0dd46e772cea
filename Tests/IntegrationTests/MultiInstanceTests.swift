import APNsSimulator
import Crypto
import Foundation
import PushgateCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Several `pushgate` daemons (child processes of the built binary) on one PostgreSQL database and one
/// simulator: they share the registry and the work.
///
/// Each daemon signs with its own token key, so the simulator's records say which instance sent what.
@Suite(
    "Several gateway instances on one PostgreSQL database",
    .serialized,
    .timeLimit(.minutes(15)),
    .enabled(
        if: PostgresTestDatabase.isAvailable,
        "PUSHGATE_TEST_POSTGRES_URL is not set: no PostgreSQL server to test against"
    ),
    .enabled(
        if: FileManager.default.isExecutableFile(atPath: GatewayCrashTests.gatewayBinary),
        "needs the pushgate binary built next to the tests"
    )
)
struct MultiInstanceTests {
    static let devices = 20_000
    static let teamID = "TEAM123456"
    static let instances = [("instance-a", "KEYAAAAAAA"), ("instance-b", "KEYBBBBBBB")]

    static func token(_ index: Int) -> String { String(format: "%064x", 0x0a11_0000 + index) }

    struct Instance {
        let name: String
        let keyID: String
        let process: SpawnedProcess
        let output: OutputCollector
        let registrationPort: Int
        let notificationPort: Int
    }

    /// The `--instance-id` an instance is started with.
    enum InstanceChoice {
        /// Its name.
        case name
        case explicit(String)
        /// None: the default, unique per process with PostgreSQL.
        case unset

        func arguments(_ name: String) -> [String] {
            switch self {
            case .name: ["--instance-id", name]
            case .explicit(let id): ["--instance-id", id]
            case .unset: []
            }
        }
    }

    /// Starts `pushgate -f --store …` (password through the environment) without waiting for it.
    static func start(
        _ name: String,
        keyID: String,
        keyPath: String,
        database: PostgresTestDatabase,
        simulator: RunningAPNsSimulator,
        chunkSize: Int,
        leaseSeconds: Int = 30,
        instanceID: InstanceChoice = .name
    ) throws -> Instance {
        let registrationPort = ExternalTools.freeUDPPort()
        let notificationPort = ExternalTools.freeUDPPort()
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: GatewayCrashTests.gatewayBinary)
        process.arguments =
            [
                "-f", "--store", database.urlWithoutPassword, "-l", "127.0.0.1",
                "-g", "\(registrationPort)", "-n", "\(notificationPort)", "--http-port", "0",
                "--apns-host", "127.0.0.1:\(simulator.port)", "--ca", simulator.caCertificatePath!, "--auth-key",
                keyPath,
                "--key-id", keyID, "--team-id", teamID, "--topic", "com.example.pushgate", "--max-connections", "1",
                "--chunk-size", "\(chunkSize)", "--lease", "\(leaseSeconds)",
            ] + instanceID.arguments(name)
            + (ProcessInfo.processInfo.environment["PUSHGATE_TEST_LOG"].map { ["--log-level", $0] } ?? [])
        var environment = ProcessInfo.processInfo.environment
        environment["PUSHGATE_STORE_PASSWORD"] = database.password
        process.environment = environment
        let output = OutputCollector()
        let pipe = Pipe()
        process.standardError = pipe
        process.standardOutput = FileHandle.nullDevice
        pipe.fileHandleForReading.readChunksInBackground { output.append($0) }
        try process.run()
        return Instance(
            name: name,
            keyID: keyID,
            process: process,
            output: output,
            registrationPort: registrationPort,
            notificationPort: notificationPort
        )
    }

    /// Starts every instance of `instances` (each with its own key) without waiting for them.
    static func startAll(
        database: PostgresTestDatabase,
        simulator: RunningAPNsSimulator,
        keyPaths: [String: String],
        chunkSize: Int,
        leaseSeconds: Int = 30,
        instanceID: InstanceChoice = .name
    ) throws -> [Instance] {
        try instances.map { name, keyID in
            try start(
                name,
                keyID: keyID,
                keyPath: keyPaths[keyID]!,
                database: database,
                simulator: simulator,
                chunkSize: chunkSize,
                leaseSeconds: leaseSeconds,
                instanceID: instanceID
            )
        }
    }

    static func waitUntilReady(_ instance: Instance) async throws {
        try await eventually("\(instance.name) is ready", timeout: .seconds(90)) {
            if !instance.process.isRunning {
                throw ExternalTools.ToolError("\(instance.name) exited early:\n\(instance.output.text)")
            }
            return instance.output.text.contains("pushgate ready")
        }
    }

    /// A simulator that knows every instance's key, keeps a record of every notification, and answers
    /// after `latency` on at most 50 streams per connection (so that a broadcast takes seconds).
    static func withSimulator<R: Sendable>(
        latencyMilliseconds: Int,
        _ body: @Sendable (RunningAPNsSimulator, [String: String]) async throws -> R
    ) async throws -> R {
        let directory = try TemporaryDirectory()
        var configuration = APNsSimulator.Configuration()
        var keyPaths = [String: String]()
        for (_, keyID) in instances {
            let key = P256.Signing.PrivateKey()
            let path = directory.path("AuthKey_\(keyID).p8")
            try key.pemRepresentation.write(toFile: path, atomically: true, encoding: .utf8)
            keyPaths[keyID] = path
            configuration.tokenKeys.append(ProviderTokenKey(keyID: keyID, teamID: teamID, publicKey: key.publicKey))
        }
        configuration.maxConcurrentStreams = 50
        configuration.faults.latencyMilliseconds = latencyMilliseconds
        configuration.recordLimit = devices * 2
        configuration.logger = TestLogger.make("simulator")
        return try await APNsSimulator.withRunning(configuration) { simulator in
            let result = try await body(simulator, keyPaths)
            _ = directory
            return result
        }
    }

    /// Accepted notifications per instance, from the key id in each recorded request's provider token.
    static func split(_ simulator: RunningAPNsSimulator) -> [String: Int] {
        var byKey = [String: Int]()
        for record in simulator.notifications() {
            byKey[keyID(ofAuthorization: record.headers["authorization"] ?? ""), default: 0] += 1
        }
        var byInstance = [String: Int]()
        for (name, keyID) in instances { byInstance[name] = byKey[keyID] ?? 0 }
        return byInstance
    }

    /// The `kid` of `bearer <JWT>`.
    static func keyID(ofAuthorization value: String) -> String {
        guard value.lowercased().hasPrefix("bearer "), let header = value.dropFirst(7).split(separator: ".").first
        else { return "?" }
        var base64 = header.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let kid = object["kid"] as? String
        else { return "?" }
        return kid
    }

    static let broadcast = #"{"groups": ["all"], "type": "normal", "payload": {"aps": {"alert": "to everyone"}}}"#

    @Test("two instances share a broadcast to 20,000 devices: every device exactly once, both did part of the work")
    func broadcastIsShared() async throws {
        let database = try PostgresTestDatabase()
        defer { database.drop() }
        try await database.register(count: Self.devices, in: "all", token: Self.token)
        try await Self.withSimulator(latencyMilliseconds: 5) { simulator, keyPaths in
            let running = try Self.startAll(
                database: database,
                simulator: simulator,
                keyPaths: keyPaths,
                chunkSize: 1_000
            )
            defer { for instance in running { kill(instance.process.processIdentifier, SIGKILL) } }
            for instance in running { try await Self.waitUntilReady(instance) }
            let started = ContinuousClock.now
            try UDPSender(port: running[0].notificationPort).send(Self.broadcast)
            try await eventually("every device reached", timeout: .seconds(400)) {
                simulator.stats().devices >= Self.devices
            }
            let elapsed = ContinuousClock.now - started
            try await eventually("an instance reports the request done", timeout: .seconds(60)) {
                running.contains { $0.output.text.contains("notification request done") }
            }
            let stats = simulator.stats()
            let split = Self.split(simulator)
            print(
                "multi-instance broadcast: \(Self.devices) devices in \(elapsed), instance-a sent \(split["instance-a"]!), instance-b sent \(split["instance-b"]!), \(stats.duplicates) duplicates"
            )
            #expect(stats.devices == Self.devices, "every device reached")
            #expect(stats.accepted == Self.devices, "no device twice")
            #expect(stats.duplicates == 0)
            #expect(split.values.reduce(0, +) == Self.devices, "every notification attributed to one instance")
            #expect(split["instance-a"]! > 0 && split["instance-b"]! > 0, "both instances sent part of the broadcast")
            for instance in running {
                #expect(!instance.output.text.contains(":\(database.password)@"), "no password in the logs")
            }
        }
    }

    @Test(
        "one of two instances killed (SIGKILL) mid-broadcast: the other finishes, nothing lost, duplicates within one chunk"
    )
    func survivorFinishesTheBroadcast() async throws {
        let chunkSize = 2_000
        let database = try PostgresTestDatabase()
        defer { database.drop() }
        try await database.register(count: Self.devices, in: "all", token: Self.token)
        try await Self.withSimulator(latencyMilliseconds: 5) { simulator, keyPaths in
            let running = try Self.startAll(
                database: database,
                simulator: simulator,
                keyPaths: keyPaths,
                chunkSize: chunkSize,
                leaseSeconds: 30
            )
            defer { for instance in running { kill(instance.process.processIdentifier, SIGKILL) } }
            for instance in running { try await Self.waitUntilReady(instance) }
            let (survivor, victim) = (running[0], running[1])
            try UDPSender(port: survivor.notificationPort).send(Self.broadcast)
            try await eventually("both instances under way") {
                let split = Self.split(simulator)
                return split["instance-a"]! > 0 && split["instance-b"]! > 0 && simulator.stats().accepted >= 5_000
            }
            kill(victim.process.processIdentifier, SIGKILL)
            try await eventually("the victim exited", timeout: .seconds(30)) { !victim.process.isRunning }
            let atKill = simulator.stats().accepted
            let victimSent = Self.split(simulator)["instance-b"]!
            #expect(atKill < Self.devices, "the kill came too late to test anything")

            // Done means every target has a recorded outcome, each recorded after the simulator answered it:
            // from then on the simulator's counts are final, and a device never reached is lost for good.
            do {
                try await eventually("the survivor reports the request done", timeout: .seconds(400)) {
                    survivor.output.text.contains("notification request done")
                }
            } catch {
                Issue.record(
                    "\(error): \(simulator.stats().devices) devices reached; survivor's log ends with:\n\(survivor.output.text.suffix(4_000))"
                )
                return
            }
            let stats = simulator.stats()
            let duplicates = stats.accepted - Self.devices
            let takeovers = survivor.output.text.components(separatedBy: "taking over an unfinished chunk").count - 1
            print(
                "multi-instance crash: \(Self.devices) devices, chunks of \(chunkSize), \(atKill) reached when instance-b was killed (it had sent \(victimSent)), \(stats.devices) reached in the end, \(stats.accepted) deliveries, \(duplicates) duplicates, \(takeovers) chunk(s) taken over by instance-a"
            )
            #expect(stats.devices == Self.devices, "nothing lost")
            #expect(duplicates <= chunkSize, "duplicates bounded by the dead instance's one chunk in flight")
            #expect(stats.duplicates == duplicates)
        }
    }

    @Test("one explicit id, two processes: the second refused (exit 78) while the first lives, taken over once it died")
    func liveInstanceIDRefused() async throws {
        let database = try PostgresTestDatabase()
        defer { database.drop() }
        try await Self.withSimulator(latencyMilliseconds: 0) { simulator, keyPaths in
            let (name, keyID) = Self.instances[0]
            func start() throws -> Instance {
                try Self.start(
                    name,
                    keyID: keyID,
                    keyPath: keyPaths[keyID]!,
                    database: database,
                    simulator: simulator,
                    chunkSize: 1_000,
                    instanceID: .explicit("shared")
                )
            }
            let first = try start()
            defer { kill(first.process.processIdentifier, SIGKILL) }
            try await Self.waitUntilReady(first)

            let second = try start()
            defer { kill(second.process.processIdentifier, SIGKILL) }
            // The second waits one time to live (15 s) for the claim to lapse; the first keeps renewing it.
            do {
                try await eventually("the second instance gives up", timeout: .seconds(90)) {
                    !second.process.isRunning
                }
            } catch {
                Issue.record(
                    "\(error); the first's log ends with:\n\(first.output.text.suffix(3_000))\nthe second's:\n\(second.output.text.suffix(3_000))"
                )
                return
            }
            #expect(second.process.terminationStatus == 78)
            #expect(second.output.text.contains("shared is in use by another live process"))
            // Whoever waits for readiness (a detached start's parent, systemd) hears the refusal, not "ready".
            #expect(!second.output.text.contains("pushgate ready"), "ready before the id was its own")
            #expect(first.process.isRunning, "the first instance runs on")

            // A crash leaves the claim behind: a restart with the same id waits it out and takes over.
            kill(first.process.processIdentifier, SIGKILL)
            try await eventually("the first instance died", timeout: .seconds(30)) { !first.process.isRunning }
            let restarted = try start()
            defer { kill(restarted.process.processIdentifier, SIGKILL) }
            try await eventually("the restart took the id over", timeout: .seconds(60)) {
                restarted.output.text.contains("instance id taken over")
            }
            #expect(restarted.output.text.contains("waiting for its claim to lapse"))
            try await Self.waitUntilReady(restarted)
            let log = restarted.output.text
            #expect(
                log.range(of: "instance id taken over")!.lowerBound < log.range(of: "pushgate ready")!.lowerBound,
                "ready only once the id was taken over"
            )
        }
    }

    @Test("two instances left on their default ids: the ids differ, and both serve")
    func defaultInstanceIDsDiffer() async throws {
        let database = try PostgresTestDatabase()
        defer { database.drop() }
        try await Self.withSimulator(latencyMilliseconds: 0) { simulator, keyPaths in
            let running = try Self.startAll(
                database: database,
                simulator: simulator,
                keyPaths: keyPaths,
                chunkSize: 1_000,
                instanceID: .unset
            )
            defer { for instance in running { kill(instance.process.processIdentifier, SIGKILL) } }
            for instance in running { try await Self.waitUntilReady(instance) }
            let ids = running.map { Self.instanceID(in: $0.output.text) }
            print("default instance ids: \(ids)")
            #expect(ids.allSatisfy { $0 != nil && $0 != "local" }, "each logs a per-process id")
            #expect(ids[0] != ids[1], "unique per process")
            // The claim comes before the dispatcher starts, which may be after the ready line.
            try await eventually("each claimed its own id", timeout: .seconds(60)) {
                (try? database.psql("SELECT COUNT(*) FROM \(database.configuration.schema).instance")) == "2"
            }
        }
    }

    /// The `push.instance` of the "pushgate starting" line.
    static func instanceID(in log: String) -> String? {
        guard let line = log.split(separator: "\n").first(where: { $0.contains("pushgate starting") }),
            let range = line.range(of: "push.instance=")
        else { return nil }
        return String(line[range.upperBound...].prefix { !$0.isWhitespace })
    }

    @Test("two instances started at once on an empty database: the schema is migrated once, and both serve")
    func concurrentStartMigratesOnce() async throws {
        let database = try PostgresTestDatabase()
        defer { database.drop() }
        try await Self.withSimulator(latencyMilliseconds: 0) { simulator, keyPaths in
            let running = try Self.startAll(
                database: database,
                simulator: simulator,
                keyPaths: keyPaths,
                chunkSize: 1_000
            )
            defer { for instance in running { kill(instance.process.processIdentifier, SIGKILL) } }
            for instance in running { try await Self.waitUntilReady(instance) }

            // A registration on instance A, a notification through instance B: B sees A's registry.
            let device = Self.token(42)
            try UDPSender(port: running[0].registrationPort).send(#"{"device": "\#(device)", "group": "shared"}"#)
            try await eventually("the registration is stored") {
                (try? database.psql("SELECT COUNT(*) FROM \(database.configuration.schema).membership")) == "1"
            }
            try UDPSender(port: running[1].notificationPort).send(
                #"{"groups": ["shared"], "type": "normal", "payload": {"aps": {"alert": "hi"}}}"#
            )
            try await eventually("the device is reached") { simulator.stats().devices == 1 }

            let versions = try database.psql(
                "SELECT version FROM \(database.configuration.schema).pushgate_migration ORDER BY version"
            )
            let appliedBy = running.filter { $0.output.text.contains("applied schema migration") }.map(\.name)
            print(
                "multi-instance start: migrations recorded \(versions.split(separator: "\n")), applied by \(appliedBy)"
            )
            let recorded = versions.split(separator: "\n").compactMap { Int($0) }
            #expect(recorded.count == Set(recorded).count, "each migration recorded once")
            #expect(recorded == Array(1...recorded.count) && recorded.count >= 3, "every migration, in order, from 1")
            #expect(appliedBy.count == 1, "one instance migrated, the other found it done")
            #expect(running.allSatisfy { $0.process.isRunning }, "both instances run")
            // Instance B accepted a request for a group that only instance A was told about (an unknown group
            // is rejected), and one of them delivered it: whichever claimed the chunk first.
            #expect(
                Self.split(simulator).values.reduce(0, +) == 1,
                "the device registered through A, notified through B, reached once"
            )
        }
    }
}
