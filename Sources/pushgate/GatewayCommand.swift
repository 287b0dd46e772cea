import APNsClient
import APNsSimulator
import ArgumentParser
import Crypto
import Foundation
import Logging
import PushgateCore
import PushgateDispatch
import PushgateGateway
import PushgateHTTP
import PushgatePostgres
import PushgateUDP
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

/// The daemon, with the C pushd's flags (same letters, same meanings) plus long options.
struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Run the gateway daemon (the default command).",
        discussion: """
            The C pushd's flags keep their letters and meanings. Without -f the daemon detaches and logs to \
            the -o file. Try it with no Apple account: `pushgate -f --simulator`.
            """
    )

    @Flag(name: .customShort("f"), help: "Stay in the foreground and log to standard error.")
    var foreground = false

    @Option(name: .customShort("d"), help: "Path to the database.")
    var database = "pushgate.db"

    @Option(name: .customShort("l"), help: "Local address to listen on (every address it resolves to).")
    var listen = "localhost"

    @Option(name: .customShort("g"), help: "Group device registration UDP port.")
    var registrationPort = 7734

    @Option(name: .customShort("n"), help: "Notification request UDP port.")
    var notificationPort = 7874

    @Flag(name: .customShort("s"), help: "Connect to api.sandbox.push.apple.com instead of api.push.apple.com.")
    var sandbox = false

    @Flag(name: .customShort("p"), help: "Connect to port 2197 instead of 443.")
    var alternativePort = false

    @Option(name: .customShort("c"), help: "Client certificate file path (PEM, or .p12).")
    var certificate = "pushd.crt"

    @Option(name: .customShort("k"), help: "Client key file path (PEM).")
    var key = "pushd.key"

    @Option(name: .customShort("t"), help: "Ping period in minutes (0 disables).")
    var pingMinutes = 60

    @Option(name: .customShort("i"), help: "Idle timeout in hours (0 disables).")
    var idleHours = 24

    @Option(name: .customShort("r"), help: "Notifications per second per connection (0 disables). pushd's default was 5.")
    var rate = 0

    @Option(name: .customShort("o"), help: "Log file path (used when detached).")
    var logFile = "pushgate.log"

    @Option(help: "The bundle id (apns-topic). Defaults to the certificate subject's UID.")
    var topic: String?

    @Option(name: .customLong("apns-host"), help: "Connect to HOST:PORT instead of Apple (a simulator or a proxy).")
    var apnsHost: String?

    @Option(help: "Trust this CA file (PEM) for the APNs server certificate instead of the system store.")
    var ca: String?

    @Option(name: .customLong("auth-key"), help: "Token auth: the .p8 signing key (instead of -c/-k).")
    var authKey: String?

    @Option(name: .customLong("key-id"), help: "Token auth: the key id.")
    var keyID: String?

    @Option(name: .customLong("team-id"), help: "Token auth: the team id.")
    var teamID: String?

    @Flag(help: "Run an APNs simulator in-process and deliver to it: try pushgate without an Apple account.")
    var simulator = false

    @Option(name: .customLong("max-connections"), help: "Most APNs connections per app (opened only while the open ones are full).")
    var maximumConnections = 8

    @Option(name: .customLong("max-streams"), help: "Most concurrent streams per APNs connection (the server may allow fewer).")
    var maximumStreams = 100

    @Option(name: .customLong("http-port"), help: "HTTP API port on loopback (0 picks one; -1 disables it). API keys, needed beyond loopback, come later.")
    var httpPort = 7880

    @Option(name: .customLong("instance-id"), help: "This instance's name in the ledger's work leases.")
    var instanceID = "local"

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error.")
    var logLevel: String?

    @Option(
        name: .customLong("store"),
        help: "A PostgreSQL database shared by several instances, postgres://user@host:port/database[?schema=NAME] (instead of -d). Password: in the URL, PUSHGATE_STORE_PASSWORD or --store-password-file.")
    var store: String?

    @Option(name: .customLong("store-password-file"), help: "Read the PostgreSQL password from this file (its first line).")
    var storePasswordFile: String?

    @Option(name: .customLong("chunk-size"), help: "Devices per unit of work an instance claims (default 20,000; with --store, 10,000).")
    var chunkSize: Int?

    @Option(name: .customLong("lease"), help: "Seconds a claimed unit of work stays with an instance that stopped renewing it (default 60; with --store, 30).")
    var leaseSeconds: Int?

    func validate() throws {
        for (flag, port) in [("-g", registrationPort), ("-n", notificationPort)] where !(0...65535).contains(port) {
            throw ValidationError("\(flag): \(port) is not a port number")
        }
        guard pingMinutes >= 0 else { throw ValidationError("-t: must be 0 (off) or a number of minutes") }
        guard idleHours >= 0 else { throw ValidationError("-i: must be 0 (off) or a number of hours") }
        guard rate >= 0 else { throw ValidationError("-r: must be 0 (off) or notifications per second") }
        guard maximumConnections >= 1 else { throw ValidationError("--max-connections: at least 1") }
        guard (-1...65535).contains(httpPort) else { throw ValidationError("--http-port: \(httpPort) is not a port number (-1 disables the API)") }
        guard maximumStreams >= 1 else { throw ValidationError("--max-streams: at least 1") }
        if authKey != nil && (keyID == nil || teamID == nil) { throw ValidationError("--auth-key needs --key-id and --team-id") }
        if let logLevel, Logger.Level(rawValue: logLevel) == nil { throw ValidationError("--log-level: unknown level \(logLevel)") }
        if let chunkSize, chunkSize < 1 { throw ValidationError("--chunk-size: at least 1") }
        if let leaseSeconds, leaseSeconds < 3 { throw ValidationError("--lease: at least 3 seconds") }
        if store == nil && storePasswordFile != nil { throw ValidationError("--store-password-file needs --store") }
        if simulator && (apnsHost != nil || authKey != nil) {
            throw ValidationError("--simulator brings its own APNs and credentials; drop --apns-host/--auth-key")
        }
    }

    func run() async throws {
        if !foreground && ProcessInfo.processInfo.environment[Self.detachedMarker] == nil {
            try Self.detach()
            return
        }
        let level = logLevel.flatMap(Logger.Level.init(rawValue:)) ?? .info
        let file = foreground ? nil : LogFile(path: logFile)
        if !foreground && file == nil {
            throw ExitCode(78)  // nobody would see a message: stdio is /dev/null once detached
        }
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler =
                file.map { FileLogHandler(file: $0, label: label) } ?? StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "pushgate")
        do {
            try await runGateway(logger: logger)
        } catch let error as ConfigurationError {
            logger.critical("\(error)")
            FileHandle.standardError.write(Data("pushgate: \(error)\n".utf8))
            throw ExitCode(78)
        }
    }

    // MARK: Composition

    private func runGateway(logger: Logger) async throws {
        if simulator {
            let key = P256.Signing.PrivateKey()
            var configuration = APNsSimulator.Configuration()
            configuration.tokenKeys = [ProviderTokenKey(keyID: "SIMULATOR1", teamID: "SIMTEAM001", publicKey: key.publicKey)]
            configuration.logger = Logger(label: "pushgate.simulator")
            try await APNsSimulator.withRunning(configuration) { running in
                logger.info(
                    "APNs simulator running in-process",
                    metadata: ["apns.simulator": "127.0.0.1:\(running.port)", "apns.simulator.ca": "\(running.caCertificatePath ?? "")"])
                let signer = try ProviderTokenSigner(privateKey: key, keyID: "SIMULATOR1", teamID: "SIMTEAM001")
                let credentials = LoadedCredentials(
                    endpoint: .init(host: "127.0.0.1", port: running.port), authentication: .token(ProviderTokenManager(signer: signer)),
                    trustRoots: .caFile(running.caCertificatePath!), defaultTopic: "com.example.pushgate")
                try await serve(credentials: credentials, logger: logger)
            }
        } else {
            let credentials = try CredentialSources(
                certificatePath: authKey == nil ? certificate : nil, keyPath: authKey == nil ? key : nil, authKeyPath: authKey,
                keyID: keyID, teamID: teamID, sandbox: sandbox, alternativePort: alternativePort, apnsHost: apnsHost, caPath: ca,
                certificateFlag: "-c", keyFlag: "-k"
            ).load()
            try await serve(credentials: credentials, logger: logger)
        }
    }

    private func serve(credentials: LoadedCredentials, logger: Logger) async throws {
        guard let topicName = topic ?? credentials.defaultTopic else {
            throw ConfigurationError("--topic: not given and the certificate has no subject UID to take it from")
        }
        let appTopic: Topic
        do { appTopic = try Topic(topicName, field: "--topic") } catch { throw ConfigurationError("--topic: \(error.message)") }

        var clientConfiguration = APNsClient.Configuration(
            endpoint: credentials.endpoint, authentication: credentials.authentication, trustRoots: credentials.trustRoots)
        clientConfiguration.maximumConnections = maximumConnections
        clientConfiguration.maximumStreamsPerConnection = maximumStreams
        clientConfiguration.pingInterval = pingMinutes == 0 ? nil : .minutes(Int64(pingMinutes))
        clientConfiguration.idleTimeout = idleHours == 0 ? nil : .hours(Int64(idleHours))
        clientConfiguration.maximumNotificationsPerSecondPerConnection = rate == 0 ? nil : rate
        var udpConfiguration = UDPIngress.Configuration()
        udpConfiguration.host = listen
        udpConfiguration.registrationPort = registrationPort
        udpConfiguration.notificationPort = notificationPort
        // The kernel charges ~830 bytes per small datagram: 64 MiB (128 MiB granted, forced when root)
        // holds a 100,000-registration burst even while a debug build writes slowly.
        udpConfiguration.receiveBufferBytes = 64 << 20
        var dispatcher = Dispatcher.Configuration(instanceID: InstanceID(instanceID))
        let storeLocation = try storeLocation()
        if case .postgres = storeLocation {
            dispatcher.chunkSize = PostgresStore.defaultChunkSize
            dispatcher.leaseDuration = PostgresStore.defaultLeaseDuration
        }
        if let chunkSize { dispatcher.chunkSize = chunkSize }
        if let leaseSeconds { dispatcher.leaseDuration = .seconds(leaseSeconds) }
        var gateway = Gateway(
            configuration: .init(
                databasePath: database, udp: udpConfiguration, client: clientConfiguration, topic: appTopic,
                dispatcher: dispatcher))
        gateway.configuration.store = storeLocation
        if httpPort >= 0 {
            // Loopback only until API keys exist, whatever -l says (UDP follows -l, as in pushd).
            gateway.configuration.http = HTTPAPI.Configuration(host: "127.0.0.1", port: httpPort)
        }
        do {
            try await gateway.run(logger: logger)
        } catch let error as Gateway.StartupError {
            throw ConfigurationError(error.description)
        }
    }

    /// `-d PATH` (SQLite), or `--store URL` (PostgreSQL) with its password from, in order,
    /// `--store-password-file`, `PUSHGATE_STORE_PASSWORD`, or the URL.
    private func storeLocation() throws -> Gateway.StoreLocation {
        guard let store else { return .sqlite(path: database) }
        var configuration: PostgresStore.Configuration
        do {
            configuration = try PostgresStore.Configuration(url: store)
        } catch let error as StoreError {
            throw ConfigurationError("--store: \(error.message)")
        }
        if let storePasswordFile {
            guard let contents = try? String(contentsOfFile: storePasswordFile, encoding: .utf8) else {
                throw ConfigurationError("--store-password-file: cannot read \(storePasswordFile)")
            }
            configuration.password = String(contents.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
        } else if let password = ProcessInfo.processInfo.environment["PUSHGATE_STORE_PASSWORD"] {
            configuration.password = password
        }
        return .postgres(configuration)
    }

    // MARK: Detaching

    static let detachedMarker = "PUSHGATE_DETACHED"

    /// Starts this same program again in a new session with `PUSHGATE_DETACHED=1`, its standard streams
    /// on /dev/null, and exits. Re-executing instead of `fork()` keeps us clear of forking a process
    /// whose runtime already started threads.
    static func detach() throws {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // POSIX_SPAWN_SETSID (glibc 2.26+): the child leaves our session and terminal. Swift's Glibc
        // module does not export the constant (it needs _GNU_SOURCE), hence the literal.
        let spawnSetSID: Int16 = 0x80
        posix_spawnattr_setflags(&attributes, spawnSetSID)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] {
            posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == STDIN_FILENO ? O_RDONLY : O_WRONLY, 0)
        }
        let arguments = CommandLine.arguments
        var environment = ProcessInfo.processInfo.environment
        environment[detachedMarker] = "1"
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid = pid_t()
        let status = posix_spawn(&pid, "/proc/self/exe", &actions, &attributes, argv, envp)
        guard status == 0 else { throw ConfigurationError("cannot detach: posix_spawn failed (\(status))") }
    }
}

/// The daemon's log file (`-o`), opened once with O_APPEND so that every logger's lines land whole
/// and in order, whoever else appends to the file.
final class LogFile: Sendable {
    private let descriptor: Int32

    init?(path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return nil }
        descriptor = fd
    }

    func append(_ line: String) {
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { write(descriptor, $0.baseAddress, $0.count) }
    }

    deinit { close(descriptor) }
}

/// Writes log lines to the daemon's log file: the log when detached.
struct FileLogHandler: LogHandler {
    private let file: LogFile
    private let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    init(file: LogFile, label: String) {
        self.file = file
        self.label = label
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        let rendered = merged.isEmpty ? "" : " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        file.append("\(Date().formatted(.iso8601)) \(event.level) \(label):\(rendered) \(event.message)\n")
    }
}
