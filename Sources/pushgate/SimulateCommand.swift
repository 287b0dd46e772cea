import APNsSimulator
import ArgumentParser
import FCMSimulator
import Foundation
import Logging
import ServiceLifecycle
import WebPushSimulator

/// `pushgate simulate`: the APNs, FCM and (with --webpush-port) Web Push simulators on their own, until
/// SIGINT or SIGTERM.
struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Run the APNs, FCM and Web Push simulators.",
        discussion: """
            An APNs on loopback: HTTP/2 over TLS answering POST /3/device/<token> with Apple's statuses \
            and reasons, with a control API (/notifications, /stats, /devices/{token}/unregister, \
            /devices/{token}/bad, /faults, /reset, /legacy/...). Also the legacy binary gateway and \
            feedback ports (Apple retired that interface on 31 March 2021). Without --tls-cert/--tls-key it generates a CA and \
            a server certificate for localhost, 127.0.0.1 and ::1 and writes the CA to --ca-out (or a \
            temporary file); point the gateway's --ca at it. The FCM simulator (--fcm-port) answers \
            POST /token and /v1/projects/{project}/messages:send; it writes a throwaway service-account file \
            (--fcm-account-out) for the gateway's --fcm-service-account, and its CA for --fcm-ca. The Web Push \
            simulator (--webpush-port; off by default) is a push service with two origins, one offering HTTP/2 \
            and HTTP/1.1 (--webpush-port), one HTTP/1.1 only (--webpush-http1-port); its control API makes \
            subscriptions (POST /subscriptions), scripts answers and lists what each subscription received.
            """
    )

    @Option(help: "Address to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "HTTP/2 (APNs) port; 0 picks a free one.")
    var port: Int = 2197

    @Option(name: .customLong("control-port"), help: "Control API (HTTP/1.1 JSON) port; 0 picks a free one.")
    var controlPort: Int = 2198

    @Option(
        name: .customLong("legacy-port"),
        help: "Legacy binary gateway port (Apple's was 2195); 0 (default) picks a free one, -1 disables it."
    )
    var legacyPort: Int = 0

    @Option(
        name: .customLong("feedback-port"),
        help: "Legacy feedback service port (Apple's was 2196); 0 (default) picks a free one, -1 disables it."
    )
    var feedbackPort: Int = 0

    @Option(name: .customLong("tls-cert"), help: "Server certificate chain (PEM file).")
    var tlsCertificate: String?

    @Option(name: .customLong("tls-key"), help: "Server private key (PEM file).")
    var tlsKey: String?

    @Option(
        name: .customLong("client-ca"),
        help: "Require client certificates signed by these CAs (PEM file); the subject UID names the allowed topic."
    )
    var clientCA: String?

    @Option(
        name: .customLong("token-key"),
        help: ArgumentHelp(
            "Accept provider tokens signed by this key (repeatable).",
            discussion: "KEYID:TEAMID:PEM, the PEM inline (\\n escapes allowed) or a path to a PEM file.",
            valueName: "KEYID:TEAMID:PEM"
        )
    )
    var tokenKeys: [String] = []

    @Option(name: .customLong("ca-out"), help: "Where to write the generated CA certificate (PEM).")
    var caOut: String?

    @Flag(name: .customLong("accept-all"), help: "Answer 200 to every push without validation (benchmarks).")
    var acceptAll = false

    @Option(name: .customLong("max-concurrent-streams"), help: "SETTINGS_MAX_CONCURRENT_STREAMS for new connections.")
    var maxConcurrentStreams: Int = 1000

    @Option(help: "APNs environment imitated: development (answers carry apns-unique-id) or production.")
    var environment: String = "development"

    @Option(help: "Event loop threads.")
    var threads: Int = 1

    @Option(name: .customLong("record-limit"), help: "Accepted notifications kept in full (counts continue beyond).")
    var recordLimit: Int = 10_000

    @Flag(name: .customLong("no-device-tracking"), help: "Do not count deliveries and duplicates per device.")
    var noDeviceTracking = false

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    @Option(
        name: .customLong("fcm-port"),
        help: "FCM simulator port (token endpoint and messages:send, TLS); 0 picks a free one, -1 disables it."
    )
    var fcmPort: Int = 2199

    @Option(name: .customLong("fcm-control-port"), help: "FCM simulator's control API port; 0 picks a free one.")
    var fcmControlPort: Int = 2200

    @Option(
        name: .customLong("fcm-account-out"),
        help: "Where to write the FCM simulator's throwaway service-account JSON file (default: a temporary file)."
    )
    var fcmAccountOut: String?

    @Option(
        name: .customLong("fcm-latency-ms"),
        help: "Hold every FCM answer this many milliseconds (a round trip to Google); POST /faults changes it."
    )
    var fcmLatencyMilliseconds: Int = 0

    @Option(
        name: .customLong("webpush-port"),
        help:
            "Web Push simulator's first origin (HTTP/2 and HTTP/1.1, TLS); 0 picks a free one, -1 (default) disables it."
    )
    var webPushPort: Int = -1

    @Option(
        name: .customLong("webpush-http1-port"),
        help: "Web Push simulator's second origin (HTTP/1.1 only); 0 (default) picks a free one, -1 leaves it out."
    )
    var webPushHTTP1Port: Int = 0

    @Option(
        name: .customLong("webpush-control-port"),
        help: "Web Push simulator's control API port; 0 picks a free one."
    )
    var webPushControlPort: Int = 0

    @Option(
        name: .customLong("webpush-worker-threads"),
        help:
            "Threads that verify VAPID and decrypt Web Push messages; 0 (default): each on its connection's event loop."
    )
    var webPushWorkerThreads: Int = 0

    @Option(
        name: .customLong("webpush-decrypt-every"),
        help: """
            1 (default): every Web Push message decrypted and every VAPID signature verified. N > 1, for \
            throughput runs: checks what a real push service checks (a VAPID signature once per distinct \
            Authorization header, every message's headers and aes128gcm record header) and decrypts every \
            Nth message.
            """
    )
    var webPushDecryptEvery: Int = 1

    func validate() throws {
        guard (0...64).contains(self.webPushWorkerThreads) else {
            throw ValidationError("--webpush-worker-threads must be 0...64")
        }
        guard self.webPushDecryptEvery >= 1 else { throw ValidationError("--webpush-decrypt-every must be at least 1") }
        guard (-1...65_535).contains(self.webPushPort) else {
            throw ValidationError("--webpush-port must be -1 (off) or 0...65535")
        }
        guard (-1...65_535).contains(self.webPushHTTP1Port) else {
            throw ValidationError("--webpush-http1-port must be -1 (none) or 0...65535")
        }
        guard (0...65_535).contains(self.webPushControlPort) else {
            throw ValidationError("--webpush-control-port must be 0...65535")
        }
        guard (0...65_535).contains(self.port) else { throw ValidationError("--port must be 0...65535") }
        guard (0...65_535).contains(self.controlPort) else { throw ValidationError("--control-port must be 0...65535") }
        guard (-1...65_535).contains(self.legacyPort) else {
            throw ValidationError("--legacy-port must be -1 (off) or 0...65535")
        }
        guard (-1...65_535).contains(self.feedbackPort) else {
            throw ValidationError("--feedback-port must be -1 (off) or 0...65535")
        }
        guard (self.tlsCertificate == nil) == (self.tlsKey == nil) else {
            throw ValidationError("--tls-cert and --tls-key go together")
        }
        guard (-1...65_535).contains(self.fcmPort) else {
            throw ValidationError("--fcm-port must be -1 (off) or 0...65535")
        }
        guard (0...65_535).contains(self.fcmControlPort) else {
            throw ValidationError("--fcm-control-port must be 0...65535")
        }
        guard (0...600_000).contains(self.fcmLatencyMilliseconds) else {
            throw ValidationError("--fcm-latency-ms must be 0...600000")
        }
        guard self.threads >= 1 else { throw ValidationError("--threads must be at least 1") }
        guard self.maxConcurrentStreams >= 0 else { throw ValidationError("--max-concurrent-streams must be ≥ 0") }
        guard self.recordLimit >= 0 else { throw ValidationError("--record-limit must be ≥ 0") }
        guard APNsSimulator.Configuration.Environment(rawValue: self.environment) != nil else {
            throw ValidationError("--environment must be development or production")
        }
        guard Logger.Level(rawValue: self.logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: self.logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let configuration: APNsSimulator.Configuration
        do {
            configuration = try self.makeConfiguration()
        } catch let error as SimulatorError {
            FileHandle.standardError.write(Data("pushgate simulate: \(error.description)\n".utf8))
            throw ExitCode(78)
        }

        let simulator = APNsSimulator(configuration: configuration) { running in
            var lines = ["APNs simulator (HTTP/2, TLS) listening on https://\(running.authority)"]
            if let controlPort = running.controlPort {
                let host = running.host.contains(":") ? "[\(running.host)]" : running.host
                lines.append("control API (HTTP/1.1) listening on http://\(host):\(controlPort)")
            }
            let host = running.host.contains(":") ? "[\(running.host)]" : running.host
            if let legacyPort = running.legacyPort {
                lines.append("legacy binary gateway (TLS) listening on \(host):\(legacyPort)")
            }
            if let feedbackPort = running.feedbackPort {
                lines.append("legacy feedback service (TLS) listening on \(host):\(feedbackPort)")
            }
            if let path = running.caCertificatePath {
                lines.append("CA certificate written to \(path)")
            }
            // Unbuffered, so scripts reading a pipe see the ports at once.
            FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
        }
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: simulator)]
        if fcmPort >= 0 { services.append(.init(service: makeFCMSimulator())) }
        if let webPush = webPushConfiguration() { services.append(.init(service: makeWebPushSimulator(webPush))) }
        let group = ServiceGroup(
            configuration: .init(
                services: services,
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: configuration.logger
            )
        )
        do {
            try await group.run()
        } catch let error as SimulatorError {
            FileHandle.standardError.write(Data("pushgate simulate: \(error.description)\n".utf8))
            throw ExitCode(78)
        }
    }

    /// The FCM simulator, which prints where it listens and writes a service account it knows.
    private func makeFCMSimulator() -> FCMSimulator {
        var configuration = FCMSimulator.Configuration()
        configuration.host = host
        configuration.port = fcmPort
        configuration.controlPort = fcmControlPort
        configuration.eventLoopThreads = threads
        configuration.recordLimit = recordLimit
        configuration.latencyMilliseconds = fcmLatencyMilliseconds
        configuration.logger = Logger(label: "pushgate.fcm-simulator")
        let accountPath =
            fcmAccountOut
            ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("pushgate-fcm-service-account-\(UUID().uuidString).json").path
        return FCMSimulator(configuration: configuration) { running in
            let account = try running.makeServiceAccount()
            try account.write(to: accountPath)
            let host = running.host.contains(":") ? "[\(running.host)]" : running.host
            var lines = ["FCM simulator (HTTP/2, TLS) listening on https://\(host):\(running.port)"]
            if let controlPort = running.controlPort {
                lines.append("FCM control API (HTTP/1.1) listening on http://\(host):\(controlPort)")
            }
            lines.append("FCM CA certificate written to \(running.caCertificatePath)")
            lines.append("FCM service account written to \(accountPath)")
            FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
        }
    }

    /// The Web Push simulator's configuration, or nil when --webpush-port is -1.
    func webPushConfiguration() -> WebPushSimulator.Configuration? {
        guard webPushPort >= 0 else { return nil }
        var configuration = WebPushSimulator.Configuration()
        configuration.host = host
        configuration.origins = [.init(port: webPushPort, offersHTTP2: true)]
        if webPushHTTP1Port >= 0 { configuration.origins.append(.init(port: webPushHTTP1Port, offersHTTP2: false)) }
        configuration.controlPort = webPushControlPort
        configuration.eventLoopThreads = threads
        configuration.workerThreads = webPushWorkerThreads
        configuration.decryptEvery = webPushDecryptEvery
        configuration.recordLimit = recordLimit
        configuration.logger = Logger(label: "pushgate.webpush-simulator")
        return configuration
    }

    /// The Web Push simulator, which prints its origins, control API and CA.
    private func makeWebPushSimulator(_ configuration: WebPushSimulator.Configuration) -> WebPushSimulator {
        WebPushSimulator(configuration: configuration) { running in
            var lines: [String] = []
            for (index, origin) in running.origins.enumerated() {
                let protocols = configuration.origins[index].offersHTTP2 ? "HTTP/2 and HTTP/1.1" : "HTTP/1.1"
                lines.append("Web Push simulator origin \(index) (\(protocols), TLS) listening on \(origin)")
            }
            if let controlPort = running.controlPort {
                let host = running.host.contains(":") ? "[\(running.host)]" : running.host
                lines.append("Web Push control API (HTTP/1.1) listening on http://\(host):\(controlPort)")
            }
            lines.append("Web Push CA certificate written to \(running.caCertificatePath)")
            FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
        }
    }

    private func makeConfiguration() throws -> APNsSimulator.Configuration {
        var configuration = APNsSimulator.Configuration()
        configuration.host = self.host
        configuration.port = self.port
        configuration.controlPort = self.controlPort
        configuration.legacyPort = self.legacyPort >= 0 ? self.legacyPort : nil
        configuration.feedbackPort = self.feedbackPort >= 0 ? self.feedbackPort : nil
        if let certificate = self.tlsCertificate, let key = self.tlsKey {
            configuration.tls = .files(certificateChain: certificate, privateKey: key)
        }
        configuration.caCertificateOutputPath = self.caOut
        if let clientCA = self.clientCA {
            do {
                configuration.clientCertificateAuthorityPEM = try String(contentsOfFile: clientCA, encoding: .utf8)
            } catch {
                throw SimulatorError.invalidConfiguration(key: "--client-ca", problem: "cannot read \(clientCA)")
            }
        }
        configuration.tokenKeys = try self.tokenKeys.map(Self.parseTokenKey)
        configuration.handling = self.acceptAll ? .acceptAll : .validating
        configuration.environment = APNsSimulator.Configuration.Environment(rawValue: self.environment) ?? .development
        configuration.maxConcurrentStreams = self.maxConcurrentStreams
        configuration.eventLoopThreads = self.threads
        configuration.recordLimit = self.recordLimit
        configuration.tracksDevices = !self.noDeviceTracking
        configuration.logger = Logger(label: "pushgate.simulator")
        return configuration
    }

    /// `KEYID:TEAMID:PEM` where PEM is a file path or the PEM text (`\n` escapes allowed).
    static func parseTokenKey(_ value: String) throws -> ProviderTokenKey {
        let parts = value.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty, !parts[2].isEmpty else {
            throw SimulatorError.invalidConfiguration(key: "--token-key", problem: "expected KEYID:TEAMID:PEM")
        }
        let keyID = String(parts[0])
        let teamID = String(parts[1])
        let source = String(parts[2])
        let pem: String
        if source.contains("-----BEGIN") {
            pem = source.replacingOccurrences(of: "\\n", with: "\n")
        } else {
            do {
                pem = try String(contentsOfFile: source, encoding: .utf8)
            } catch {
                throw SimulatorError.invalidConfiguration(
                    key: "--token-key \(keyID)",
                    problem: "\(source) is neither PEM text nor a readable file"
                )
            }
        }
        return try ProviderTokenKey(keyID: keyID, teamID: teamID, publicKeyPEM: pem)
    }
}
