import APNsHTTP2
import APNsLegacy
import APNsSimulator
import ArgumentParser
import Crypto
import Foundation
import Logging
import PushgateConfig
import PushgateCore
import PushgateDispatch
import PushgateGateway
import PushgateHTTP
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

    @Option(
        name: .customLong("config"),
        help:
            "YAML configuration file (also PUSHGATE_CONFIG). Flags override the environment, which overrides the file."
    )
    var configFile: String?

    @Option(name: .customShort("d"), help: "Path to the database (store.path; default pushgate.db).")
    var database: String?

    @Option(
        name: .customShort("l"),
        help: "Local address to listen on (listen; every address it resolves to; default localhost)."
    )
    var listen: String?

    @Option(name: .customShort("g"), help: "Group device registration UDP port (udp.registrationPort; default 7734).")
    var registrationPort: String?

    @Option(name: .customShort("n"), help: "Notification request UDP port (udp.notificationPort; default 7874).")
    var notificationPort: String?

    @Flag(name: .customShort("s"), help: "Connect to api.sandbox.push.apple.com instead of api.push.apple.com.")
    var sandbox = false

    @Flag(name: .customShort("p"), help: "Connect to port 2197 instead of 443.")
    var alternativePort = false

    @Option(name: .customShort("c"), help: "Client certificate file path (PEM, or .p12; default pushd.crt).")
    var certificate: String?

    @Option(name: .customShort("k"), help: "Client key file path (PEM; default pushd.key).")
    var key: String?

    @Option(name: .customShort("t"), help: "Ping period in minutes (0 disables; default 60).")
    var pingMinutes: String?

    @Option(name: .customShort("i"), help: "Idle timeout in hours (0 disables; default 24).")
    var idleHours: String?

    @Option(
        name: .customShort("r"),
        help: "Notifications per second per connection (0 disables, the default). pushd's default was 5."
    )
    var rate: String?

    @Option(name: .customShort("o"), help: "Log file path (used when detached).")
    var logFile = "pushgate.log"

    @Flag(name: .long, help: "Print the version and exit.")
    var version = false

    @Option(
        name: .customLong("pid-file"),
        help: "Write the daemon's process id to this file at start-up; removed when it stops."
    )
    var pidFile: String?

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

    @Flag(
        help:
            ArgumentHelp(
                "Run an APNs, an FCM and a Web Push simulator in-process and deliver to them: "
                    + "try pushgate without an Apple or Google account."
            )
    )
    var simulator = false

    @Option(
        name: .customLong("fcm-service-account"),
        help: "FCM: the Firebase service-account JSON key file (fcm.serviceAccount); the app then reaches Android too."
    )
    var fcmServiceAccount: String?

    @Option(
        name: .customLong("fcm-host"),
        help: "FCM: connect to HOST[:PORT] instead of fcm.googleapis.com:443 (a simulator)."
    )
    var fcmHost: String?

    @Option(
        name: .customLong("fcm-token-uri"),
        help: "FCM: fetch access tokens from this https URL instead of the service account's token_uri."
    )
    var fcmTokenURI: String?

    @Option(
        name: .customLong("fcm-ca"),
        help: "FCM: trust this CA file (PEM) for the FCM host and token endpoint (default: --ca with --fcm-host)."
    )
    var fcmCA: String?

    @Option(
        name: .customLong("max-connections"),
        help: "Most APNs connections per app (opened only while the open ones are full; kept open; default 16)."
    )
    var maximumConnections: String?

    @Option(
        name: .customLong("max-streams"),
        help: "A cap on concurrent streams per APNs connection (default: what the server allows, 1,000 at APNs)."
    )
    var maximumStreams: String?

    /// Unconditional: the value may start with a dash (`--http-port -1`, as documented).
    @Option(
        name: .customLong("http-port"),
        parsing: .unconditional,
        help: "HTTP API port (http.port; 0 picks one; -1 disables it; default 7880)."
    )
    var httpPort: String?

    @Option(
        name: .customLong("api-key-file"),
        help: "HTTP API bearer keys, one per line. Without keys the API serves loopback only."
    )
    var apiKeyFile: String?

    @Option(
        name: .customLong("instance-id"),
        help: ArgumentHelp(
            "This instance's name in the ledger's work leases; one live process per id "
                + "(default: local with -d, unique per process with --store)."
        )
    )
    var instanceID: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error (default info).")
    var logLevel: String?

    @Option(
        name: .customLong("store"),
        help:
            "A PostgreSQL database shared by several instances, postgres://user@host:port/database[?schema=NAME] (instead of -d). Password: in the URL, PUSHGATE_STORE_PASSWORD or --store-password-file."
    )
    var store: String?

    @Option(
        name: .customLong("store-password-file"),
        help: "Read the PostgreSQL password from this file (its first line)."
    )
    var storePasswordFile: String?

    @Option(
        name: .customLong("chunk-size"),
        help: "Devices per unit of work an instance claims (default 20,000; with --store, 10,000)."
    )
    var chunkSize: Int?

    @Option(
        name: .customLong("lease"),
        help:
            "Seconds a claimed unit of work stays with an instance that stopped renewing it (default 60; with --store, 30)."
    )
    var leaseSeconds: Int?

    @Option(
        help:
            "http2 (default), or legacy: Apple's binary interface (retired by Apple on 31 March 2021; for gateways and test rigs that still speak it)."
    )
    var transport: String?

    @Option(
        name: .customLong("legacy-host"),
        help: "With --transport legacy: the gateway HOST:PORT (default gateway.push.apple.com:2195, sandbox with -s)."
    )
    var legacyHost: String?

    @Option(
        name: .customLong("feedback-host"),
        help:
            "With --transport legacy: the feedback service HOST:PORT (default feedback.push.apple.com:2196, sandbox with -s)."
    )
    var feedbackHost: String?

    @Option(
        name: .customLong("feedback-interval"),
        help: "With --transport legacy: seconds between feedback polls (the first runs at start-up)."
    )
    var feedbackInterval: String?

    @Argument(
        parsing: .allUnrecognized,
        help:
            "Any configuration key as --key-path VALUE, e.g. --app-news-pool-max-streams 50 (see docs/configuration.md)."
    )
    var configArguments: [String] = []

    func validate() throws {
        if let chunkSize, chunkSize < 1 { throw ValidationError("--chunk-size: at least 1") }
        if let leaseSeconds, leaseSeconds < 3 { throw ValidationError("--lease: at least 3 seconds") }
        if simulator && (apnsHost != nil || authKey != nil) {
            throw ValidationError("--simulator brings its own APNs and credentials; drop --apns-host/--auth-key")
        }
        if simulator && (legacyHost != nil || feedbackHost != nil) {
            throw ValidationError("--simulator brings its own legacy gateway; drop --legacy-host/--feedback-host")
        }
        if simulator && (fcmServiceAccount != nil || fcmHost != nil || fcmTokenURI != nil || fcmCA != nil) {
            throw ValidationError("--simulator brings its own FCM and service account; drop the --fcm-* flags")
        }
    }

    /// The flags as configuration keys: the daemon's own, and those of the single app.
    var commandLine: ConfigurationLoader.CommandLine {
        var commandLine = ConfigurationLoader.CommandLine(configFile: configFile)
        func set(_ key: String, _ value: String?, _ flag: String) {
            if let value { commandLine.values[key] = .init(value, flag: flag) }
        }
        func setApp(_ key: String, _ value: String?, _ flag: String) {
            if let value { commandLine.appValues[key] = .init(value, flag: flag) }
        }
        set("store.path", database, "-d")
        set("store.url", store, "--store")
        set("listen", listen, "-l")
        set("udp.registrationPort", registrationPort, "-g")
        set("udp.notificationPort", notificationPort, "-n")
        set("http.port", httpPort, "--http-port")
        set("instanceId", instanceID, "--instance-id")
        set("logLevel", logLevel, "--log-level")
        setApp("environment", sandbox ? "sandbox" : nil, "-s")
        setApp("alternativePort", alternativePort ? "true" : nil, "-p")
        setApp("certificate.file", certificate, "-c")
        setApp("certificate.key", key, "-k")
        setApp("pool.pingMinutes", pingMinutes, "-t")
        setApp("pool.idleHours", idleHours, "-i")
        setApp("pool.rate", rate, "-r")
        setApp("topic", topic, "--topic")
        setApp("apnsHost", apnsHost, "--apns-host")
        setApp("ca", ca, "--ca")
        setApp("token.keyFile", authKey, "--auth-key")
        setApp("token.keyId", keyID, "--key-id")
        setApp("token.teamId", teamID, "--team-id")
        setApp("pool.maxConnections", maximumConnections, "--max-connections")
        setApp("pool.maxStreams", maximumStreams, "--max-streams")
        setApp("transport", transport, "--transport")
        setApp("legacy.host", legacyHost, "--legacy-host")
        setApp("legacy.feedbackHost", feedbackHost, "--feedback-host")
        setApp("legacy.feedbackInterval", feedbackInterval, "--feedback-interval")
        setApp("fcm.serviceAccount", fcmServiceAccount, "--fcm-service-account")
        setApp("fcm.host", fcmHost, "--fcm-host")
        setApp("fcm.tokenUri", fcmTokenURI, "--fcm-token-uri")
        if let fcmCA {
            setApp("fcm.ca", fcmCA, "--fcm-ca")
        } else if fcmHost != nil {
            // A stand-in named by --fcm-host: --ca serves both services unless --fcm-ca says otherwise.
            setApp("fcm.ca", ca, "--ca")
        }
        commandLine.arguments = configArguments
        return commandLine
    }

    func run() async throws {
        if version {
            print(BuildCommit.versionLine)
            return
        }
        if !foreground && ProcessInfo.processInfo.environment[Self.detachedMarker] == nil {
            let status = try Self.detach(logFile: logFile)
            if status != 0 { throw ExitCode(status) }
            return
        }
        // A detached child tells its parent how start-up went (`StartupReport`).
        let report = foreground ? nil : StartupReport.Channel.inherited()
        MallocArenas.limitUnlessConfigured(environment: ProcessInfo.processInfo.environment)
        let loaded: Result<GatewayConfiguration, ConfigurationProblem>
        do {
            loaded = .success(try await gatewayConfiguration())
        } catch {
            loaded = .failure(error)
        }
        let level = (try? loaded.get()).flatMap { Logger.Level(rawValue: $0.logLevel) } ?? .info
        let format = (try? loaded.get()).flatMap { LogOutput.Format(rawValue: $0.logFormat) } ?? .text
        let file = foreground ? nil : LogFile(path: logFile)
        if !foreground && file == nil {
            report?.failed("-o \(logFile): cannot open the log file: \(String(cString: strerror(errno)))")
            throw ExitCode(78)
        }
        let output = LogOutput(format: format, level: level, file: file)
        LoggingSystem.bootstrap { output.handler(label: $0) }
        let logger = Logger(label: "pushgate")
        // SIGHUP reopens the log file (after logrotate moved it), beside the gateway's other reloads.
        let reloadHook = ReloadHook()
        if let file {
            reloadHook.register("log file") { logger in
                if let problem = file.reopen() {
                    logger.error(
                        "cannot reopen the log file; still writing to the old one",
                        metadata: ["push.error": "\(problem)"]
                    )
                } else {
                    logger.info("log file reopened", metadata: ["push.log_file": "\(file.path)"])
                }
            }
        }
        do {
            let configuration: GatewayConfiguration
            switch loaded {
            case .success(let loaded): configuration = loaded
            case .failure(let problem): throw ConfigurationError(problem.description)
            }
            let pid = try pidFile.map { try PIDFile(path: $0) }
            defer { pid?.remove() }
            try await runGateway(configuration, logger: logger, reloadHook: reloadHook) { report?.ready() }
        } catch let error as ConfigurationError {
            logger.critical("\(error)")
            report?.failed("\(error)")
            FileHandle.standardError.write(Data("pushgate: \(error)\n".utf8))
            throw ExitCode(78)
        } catch {
            // Before it was ready, the parent hears why; after, this tells it nothing (the line was sent).
            report?.failed("\(error)")
            throw error
        }
    }

    // MARK: Composition

    /// The configuration `main` runs: flags over environment over file, plus the flags that have no key
    /// (`--api-key-file`, `--store-password-file`, `--chunk-size`, `--lease`), checked.
    func gatewayConfiguration(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) async throws(ConfigurationProblem) -> GatewayConfiguration {
        try await reading.read(environment: environment)
    }

    /// How the configuration is read, at start-up and again on every reload (SIGHUP).
    var reading: ConfigurationReading {
        ConfigurationReading(
            commandLine: commandLine,
            apiKeyFile: apiKeyFile,
            storePasswordFile: storePasswordFile,
            chunkSize: chunkSize,
            leaseSeconds: leaseSeconds
        )
    }

    private func runGateway(
        _ configuration: GatewayConfiguration,
        logger: Logger,
        reloadHook: ReloadHook,
        onReady: @escaping @Sendable () -> Void
    ) async throws {
        let reading = self.reading
        if simulator {
            try await Self.withSimulators(for: configuration, logger: logger) { simulated in
                // The apps deliver to the simulators with throwaway credentials: a reload keeps them (and
                // applies the rest, such as the API keys).
                let simulatedApps = simulated.apps
                let source = Gateway.ReloadSource { () async throws(ConfigurationProblem) in
                    var fresh = try await reading.read()
                    fresh.apps = simulatedApps
                    return fresh
                }
                try await Self.serve(
                    simulated,
                    reloadSource: source,
                    logger: logger,
                    reloadHook: reloadHook,
                    onReady: onReady
                )
            }
        } else {
            let source = Gateway.ReloadSource { () async throws(ConfigurationProblem) in try await reading.read() }
            try await Self.serve(
                configuration,
                reloadSource: source,
                logger: logger,
                reloadHook: reloadHook,
                onReady: onReady
            )
        }
    }

    /// Builds the gateway the way the end-to-end tests do (``Gateway/Configuration/init(_:environment:clock:)``)
    /// and runs it until a signal stops it.
    private static func serve(
        _ configuration: GatewayConfiguration,
        reloadSource: Gateway.ReloadSource,
        logger: Logger,
        reloadHook: ReloadHook,
        onReady: @escaping @Sendable () -> Void
    ) async throws {
        var built = try checked { () throws(ConfigurationProblem) in try Gateway.Configuration(configuration) }
        built.reloadSource = reloadSource
        let gateway = Gateway(configuration: built)
        do {
            try await gateway.run(logger: logger, reloadHook: reloadHook) { _ in onReady() }
        } catch let error as Gateway.StartupError {
            throw ConfigurationError(error.description)
        } catch let error as APNsClientError {
            throw ConfigurationError(error.description)
        }
    }

    static func checked<T>(_ body: () throws(ConfigurationProblem) -> T) throws -> T {
        do { return try body() } catch { throw ConfigurationError(error.description) }
    }

    // MARK: Detaching

    static let detachedMarker = "PUSHGATE_DETACHED"

    /// Starts this same program again in a new session with `PUSHGATE_DETACHED=1`, its standard streams
    /// on /dev/null and a pipe to report on (``StartupReport``), waits until it is ready or has failed,
    /// and answers the exit status to leave with (0: ready). Re-executing instead of `fork()` keeps us
    /// clear of forking a process whose runtime already started threads.
    static func detach(logFile: String) throws -> Int32 {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // POSIX_SPAWN_SETSID (glibc 2.26+): the child leaves our session and terminal. Swift's Glibc
        // module does not export the constant (it needs _GNU_SOURCE), hence the literal.
        let spawnSetSID: Int16 = 0x80
        posix_spawnattr_setflags(&attributes, spawnSetSID)
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw ConfigurationError("cannot detach: pipe failed") }
        _ = fcntl(pipeEnds[0], F_SETFD, FD_CLOEXEC)
        // Above the descriptors the child gets, so that moving it to 3 is a real dup2 (which clears
        // close-on-exec) and not a no-op.
        let writeEnd = fcntl(pipeEnds[1], F_DUPFD_CLOEXEC, 10)
        close(pipeEnds[1])
        let readEnd = pipeEnds[0]
        defer { close(readEnd) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] {
            posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == STDIN_FILENO ? O_RDONLY : O_WRONLY, 0)
        }
        let reportDescriptor: Int32 = 3
        posix_spawn_file_actions_adddup2(&actions, writeEnd, reportDescriptor)
        // The daemon keeps nothing else of whoever started it (a caller's socket would stay open for its life).
        SpawnFileActions.closeInheritedDescriptors(&actions, from: reportDescriptor + 1)
        let arguments = CommandLine.arguments
        var environment = ProcessInfo.processInfo.environment
        environment[detachedMarker] = "1"
        environment[StartupReport.descriptorVariable] = "\(reportDescriptor)"
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for argument in argv { free(argument) }
            for variable in envp { free(variable) }
        }
        var pid = pid_t()
        let status = posix_spawn(&pid, "/proc/self/exe", &actions, &attributes, argv, envp)
        close(writeEnd)
        guard status == 0 else { throw ConfigurationError("cannot detach: posix_spawn failed (\(status))") }
        switch StartupReport.await(readEnd: readEnd) {
        case .ready:
            return 0
        case .failed(let message):
            FileHandle.standardError.write(Data("pushgate: \(message)\n".utf8))
            return exitStatus(of: pid) ?? 1
        case .silent:
            let code = exitStatus(of: pid) ?? 1
            FileHandle.standardError.write(
                Data("pushgate: the daemon exited (status \(code)) before it was ready; see \(logFile)\n".utf8)
            )
            return code == 0 ? 1 : code
        case .timedOut:
            FileHandle.standardError.write(
                Data(
                    "pushgate: the daemon (pid \(pid)) is not ready after \(StartupReport.parentPatience); it may still be starting; see \(logFile)\n"
                        .utf8
                )
            )
            return 1
        }
    }

    /// The child's exit status once it has ended (128 + the signal if a signal ended it); nil if waiting
    /// failed.
    private static func exitStatus(of pid: pid_t) -> Int32? {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { return nil }
        }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }
}

/// `--pid-file`: the daemon's process id, written (atomically) at start-up and removed when it stops.
struct PIDFile {
    let path: String

    init(path: String) throws {
        self.path = path
        let temporary = path + ".\(getpid()).tmp"
        do {
            try Data("\(getpid())\n".utf8).write(to: URL(fileURLWithPath: temporary))
            guard rename(temporary, path) == 0 else {
                unlink(temporary)
                throw ConfigurationError("--pid-file \(path): \(String(cString: strerror(errno)))")
            }
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw ConfigurationError("--pid-file \(path): cannot write it (\(error.localizedDescription))")
        }
    }

    /// Removes the file if it still names this process (a newer daemon may have taken it over).
    func remove() {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
            Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) == getpid()
        else { return }
        unlink(path)
    }
}

/// The configuration as `pushgate` reads it: flags over environment over file
/// (``ConfigurationLoader``), plus the flags that have no key (`--api-key-file`, `--store-password-file`,
/// `--chunk-size`, `--lease`), checked. Start-up reads it once; every reload (SIGHUP) reads it again.
struct ConfigurationReading: Sendable {
    var commandLine: ConfigurationLoader.CommandLine
    var apiKeyFile: String?
    var storePasswordFile: String?
    var chunkSize: Int?
    var leaseSeconds: Int?

    func read(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) async throws(ConfigurationProblem) -> GatewayConfiguration {
        var configuration = try await ConfigurationLoader(commandLine: commandLine, environment: environment).load()
        if let apiKeyFile {
            configuration.apiKeys.append(.init(name: "command-line", source: .file(apiKeyFile)))
            configuration.flagNames["apiKey.command-line.file"] = "--api-key-file"
        }
        if let storePasswordFile {
            configuration.store.passwordFile = storePasswordFile
            configuration.flagNames["store.passwordFile"] = "--store-password-file"
        }
        if let chunkSize {
            configuration.store.chunkSize = chunkSize
            configuration.flagNames["store.chunkSize"] = "--chunk-size"
        }
        if let leaseSeconds {
            configuration.store.lease = .seconds(leaseSeconds)
            configuration.flagNames["store.lease"] = "--lease"
        }
        try configuration.validate()
        return configuration
    }
}
