import APNsSimulator
import Crypto
import FCMSimulator
import Foundation
import PushgateConfig
import PushgateCore
import PushgateGateway
import Synchronization
import Testing
import WebPushSimulator

#if canImport(Glibc)
import Glibc
#endif

/// A reload (SIGHUP) applies new API keys, APNs credentials and FCM service accounts without a restart and
/// without losing what is in flight; a reload that fails keeps everything as it was. Real files, real TLS,
/// the simulators as the oracle: which client certificate each connection presented, which key id each
/// JWT names, which service account each access token was issued to.
@Suite("Reload: API keys and credentials on SIGHUP", .serialized, .timeLimit(.minutes(5)))
struct ReloadTests {
    static let device = "00" + String(repeating: "ab", count: 31)

    /// The gateway's configuration file, rewritten by the tests; a reload reads it again.
    struct ConfigFile: Sendable {
        let path: String

        func write(_ yaml: String) throws {
            try Data(yaml.utf8).write(to: URL(fileURLWithPath: path))
        }

        func load() async throws(ConfigurationProblem) -> GatewayConfiguration {
            try await ConfigurationLoader(commandLine: .init(configFile: path), environment: [:]).load()
        }

        var reloadSource: Gateway.ReloadSource {
            let file = self
            return Gateway.ReloadSource(environment: [:]) { () async throws(ConfigurationProblem) in
                try await file.load()
            }
        }
    }

    /// What an authorised key gets for a device nobody registered (404 `unknown_device`); 401 otherwise.
    static let authorized = "404"

    static func submit(
        _ running: Gateway.Running,
        app: String,
        id: String,
        alert: String
    ) async throws -> RequestID {
        let requestID = try RequestID(id)
        _ = try await running.intake.submit(
            NotificationRequest(
                id: requestID,
                app: app,
                groups: ["all"],
                payload: try Payload(jsonString: #"{"aps":{"alert":"\#(alert)"}}"#),
                createdAt: Date()
            )
        )
        return requestID
    }

    static func waitDone(_ running: Gateway.Running, _ id: RequestID) async throws -> DeliveryReport {
        try await eventually("\(id) done") { try await running.store.report(id)?.state == .done }
        return try #require(try await running.store.report(id))
    }

    static func metric(_ running: Gateway.Running, _ prefix: String) -> Double? {
        let text = String(decoding: running.metricsExposition(), as: UTF8.self)
        return text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap {
            Double($0.split(separator: " ").last ?? "")
        }
    }

    // MARK: APNs certificate

    @Test(
        "certificate: new connections present the renewed certificate, one in flight is delivered once on the old connection, which then closes; a bad certificate keeps the renewed one"
    )
    func certificateReload() async throws {
        let files = try MultiAppFiles()
        let old = try files.authority.issueClientCertificate(topic: "com.example.news", commonName: "news 2026")
        try old.write(certificateTo: files.certificatePath, privateKeyTo: files.keyPath)
        try await APNsSimulator.withRunning(files.simulatorConfiguration) { simulator in
            let file = ConfigFile(path: files.directory.path("pushgate.yaml"))
            try file.write(
                """
                listen: 127.0.0.1
                udp: {registrationPort: 0, notificationPort: 0}
                http: {port: -1}
                store: {path: \(files.directory.path("gateway.db"))}
                apps: [news]
                app:
                  news:
                    apnsHost: "127.0.0.1:\(simulator.port)"
                    ca: \(simulator.caCertificatePath!)
                    certificate: {file: \(files.certificatePath), key: \(files.keyPath)}
                """
            )
            try await GatewayFixture.run(try await file.load(), reloadSource: file.reloadSource) { running, _ in
                _ = try await running.store.register(
                    Registration(app: "news", token: try DeviceToken(hex: Self.device), group: "all", at: Date())
                )
                func names(alert: String) -> [String] {
                    let byConnection = simulator.clientCertificateNames()
                    return simulator.notifications(device: Self.device)
                        .filter { $0.payloadString.contains(alert) }
                        .map { byConnection[$0.connectionID] ?? "none" }
                }
                let first = try await Self.submit(running, app: "news", id: "first", alert: "first")
                #expect(try await Self.waitDone(running, first).accepted == 1)
                #expect(names(alert: "first") == ["news 2026"])

                // One notification in flight: APNs has it, its answer is held.
                try simulator.updateFaults { $0.holdAnswers = true }
                let inFlight = try await Self.submit(running, app: "news", id: "in-flight", alert: "in-flight")
                try await eventually("the simulator holds the in-flight notification") {
                    simulator.stats().received == 2
                }
                let renewed = try files.authority.issueClientCertificate(
                    topic: "com.example.news",
                    commonName: "news 2027"
                )
                try renewed.write(certificateTo: files.certificatePath, privateKeyTo: files.keyPath)
                await running.reload()
                let after = try await Self.submit(running, app: "news", id: "after", alert: "after")
                try await eventually("the simulator holds the notification sent after the reload") {
                    simulator.stats().received == 3
                }
                try simulator.updateFaults { $0.holdAnswers = false }
                #expect(try await Self.waitDone(running, inFlight).accepted == 1)
                #expect(try await Self.waitDone(running, after).accepted == 1)
                #expect(names(alert: "in-flight") == ["news 2026"], "delivered once, on the connection it was on")
                #expect(names(alert: "after") == ["news 2027"], "a new connection with the renewed certificate")
                try await eventually("the old connection drained and closed") {
                    simulator.stats().connectionsActive == 1
                }
                #expect(Self.metric(running, #"pushgate_reloads_total{result="ok"}"#) == 1)

                // A broken file: the reload fails, the renewed certificate stays.
                try Data("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n".utf8)
                    .write(to: URL(fileURLWithPath: files.certificatePath))
                await running.reload()
                #expect(Self.metric(running, #"pushgate_reloads_total{result="failed"}"#) == 1)
                simulator.dropAllConnections()
                let afterBroken = try await Self.submit(running, app: "news", id: "after-broken", alert: "after-broken")
                #expect(try await Self.waitDone(running, afterBroken).accepted == 1)
                #expect(names(alert: "after-broken") == ["news 2027"])
                #expect(simulator.notifications(device: Self.device).count == 4, "each delivered once")
            }
        }
    }

    // MARK: .p8 token key

    @Test("token key: after a reload the JWTs carry the new key id, sent on new connections")
    func tokenKeyReload() async throws {
        let files = try MultiAppFiles()
        let newKey = P256.Signing.PrivateKey()
        var simulatorConfiguration = files.simulatorConfiguration
        simulatorConfiguration.tokenKeys.append(
            ProviderTokenKey(keyID: "NEWKEY0001", teamID: MultiAppFiles.teamID, publicKey: newKey.publicKey)
        )
        try await APNsSimulator.withRunning(simulatorConfiguration) { simulator in
            let file = ConfigFile(path: files.directory.path("pushgate.yaml"))
            @Sendable func yaml(keyFile: String, keyID: String, logLevel: String = "info") -> String {
                Self.weatherYAML(files, apns: simulator, keyFile: keyFile, keyID: keyID, logLevel: logLevel)
            }
            try file.write(yaml(keyFile: files.p8Path, keyID: MultiAppFiles.keyID))
            try await GatewayFixture.run(try await file.load(), reloadSource: file.reloadSource) { running, _ in
                _ = try await running.store.register(
                    Registration(app: "weather", token: try DeviceToken(hex: Self.device), group: "all", at: Date())
                )
                func keyIDs(alert: String) -> [String] {
                    simulator.notifications(device: Self.device).filter { $0.payloadString.contains(alert) }.map {
                        Self.keyID(ofAuthorization: $0.headers["authorization"] ?? "")
                    }
                }
                func connections(alert: String) -> Set<Int> {
                    Set(
                        simulator.notifications(device: Self.device).filter { $0.payloadString.contains(alert) }
                            .map(\.connectionID)
                    )
                }
                let before = try await Self.submit(running, app: "weather", id: "before", alert: "before")
                #expect(try await Self.waitDone(running, before).accepted == 1)
                #expect(keyIDs(alert: "before") == [MultiAppFiles.keyID])

                let newPath = files.directory.path("AuthKey-new.p8")
                try Data(newKey.pemRepresentation.utf8).write(to: URL(fileURLWithPath: newPath))
                // With a change that needs a restart: ignored (logged), the rest applies.
                try file.write(yaml(keyFile: newPath, keyID: "NEWKEY0001", logLevel: "debug"))
                await running.reload()
                #expect(Self.metric(running, #"pushgate_reloads_total{result="ok"}"#) == 1)
                let after = try await Self.submit(running, app: "weather", id: "after", alert: "after")
                #expect(try await Self.waitDone(running, after).accepted == 1)
                #expect(keyIDs(alert: "after") == ["NEWKEY0001"])
                #expect(connections(alert: "after").isDisjoint(with: connections(alert: "before")))

                // A key file that does not parse: the reload fails, the new key stays.
                try Data("not a key".utf8).write(to: URL(fileURLWithPath: newPath))
                await running.reload()
                #expect(Self.metric(running, #"pushgate_reloads_total{result="failed"}"#) == 1)
                let afterBroken = try await Self.submit(
                    running,
                    app: "weather",
                    id: "after-broken",
                    alert: "after-broken"
                )
                #expect(try await Self.waitDone(running, afterBroken).accepted == 1)
                #expect(keyIDs(alert: "after-broken") == ["NEWKEY0001"])
            }
        }
    }

    /// `kid` of the JWT in `bearer <jwt>`.
    static func keyID(ofAuthorization header: String) -> String {
        guard let jwt = header.split(separator: " ").last,
            let part = jwt.split(separator: ".").first
        else { return "none" }
        var base64 = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return "none" }
        return object["kid"] as? String ?? "none"
    }

    // MARK: FCM service account

    @Test(
        "FCM: after a reload access tokens are fetched for the new service account; a message sent across the reload is delivered once; another project is refused"
    )
    func serviceAccountReload() async throws {
        let files = try MultiAppFiles()
        var fcmConfiguration = FCMSimulator.Configuration()
        fcmConfiguration.logger = TestLogger.make("fcm-simulator")
        try await APNsSimulator.withRunning(files.simulatorConfiguration) { simulator in
            try await FCMSimulator.withRunning(fcmConfiguration) { fcm in
                let oldAccount = try fcm.makeServiceAccount(projectID: "reload-project")
                // The rotated key of the same project: another service account (another client_email).
                let newAccount = try Self.serviceAccount(
                    projectID: "reload-project",
                    email: "rotated@reload-project.iam.gserviceaccount.com",
                    registeredWith: fcm
                )
                let otherProject = try fcm.makeServiceAccount(projectID: "another-project")
                let accountPath = files.directory.path("fcm.json")
                try oldAccount.write(to: accountPath)
                let file = ConfigFile(path: files.directory.path("pushgate.yaml"))
                try file.write(
                    Self.weatherYAML(
                        files,
                        apns: simulator,
                        """
                            fcm: {serviceAccount: \(accountPath), host: "\(fcm.host):\(fcm.port)", ca: \(fcm.caCertificatePath)}
                        """
                    )
                )
                try await GatewayFixture.run(try await file.load(), reloadSource: file.reloadSource) { running, _ in
                    let token = "reload-1:APA91b" + String(repeating: "Qx_7-kLm", count: 19)
                    _ = try await running.store.register(
                        Registration(app: "weather", token: try DeviceToken(fcm: token), group: "all", at: Date())
                    )
                    func senders(alert: String) -> [String] {
                        fcm.messages(token: token).filter { $0.messageJSON.contains(alert) }.map(\.clientEmail)
                    }
                    let first = try await Self.submit(running, app: "weather", id: "first", alert: "first")
                    #expect(try await Self.waitDone(running, first).accepted == 1)
                    #expect(senders(alert: "first") == [oldAccount.clientEmail])

                    // Sent with the old account's token while the reload runs: answered late, delivered once.
                    fcm.setLatency(milliseconds: 2_000)
                    let across = try await Self.submit(running, app: "weather", id: "across", alert: "across")
                    try await eventually("FCM has the message; its answer is on its way") { fcm.stats().sends == 2 }
                    try Data(newAccount.json).write(to: URL(fileURLWithPath: accountPath))
                    await running.reload()
                    fcm.setLatency(milliseconds: 0)
                    let after = try await Self.submit(running, app: "weather", id: "after", alert: "after")
                    #expect(try await Self.waitDone(running, across).accepted == 1)
                    #expect(try await Self.waitDone(running, after).accepted == 1)
                    #expect(senders(alert: "across") == [oldAccount.clientEmail], "delivered once, with the old token")
                    #expect(senders(alert: "after") == [newAccount.clientEmail])
                    #expect(fcm.stats().accessTokensIssuedByAccount[newAccount.clientEmail] == 1)

                    // A service account of another Firebase project: refused, the running one stays.
                    try otherProject.write(to: accountPath)
                    await running.reload()
                    #expect(Self.metric(running, #"pushgate_reloads_total{result="failed"}"#) == 1)
                    let last = try await Self.submit(running, app: "weather", id: "last", alert: "last")
                    #expect(try await Self.waitDone(running, last).accepted == 1)
                    #expect(senders(alert: "last") == [newAccount.clientEmail])
                    #expect(fcm.stats().accessTokensIssuedByAccount[otherProject.clientEmail] == nil)
                }
            }
        }
    }

    // MARK: Web Push VAPID key

    @Test(
        "Web Push: after a reload messages carry VAPID tokens signed with the new key and subject; a subscription made for the old key is refused (an alarm); a bad key file keeps the new one"
    )
    func vapidKeyReload() async throws {
        let files = try MultiAppFiles()
        var webPushConfiguration = WebPushSimulator.Configuration()
        webPushConfiguration.logger = TestLogger.make("webpush-simulator")
        try await APNsSimulator.withRunning(files.simulatorConfiguration) { simulator in
            try await WebPushSimulator.withRunning(webPushConfiguration) { webPush in
                let oldKey = P256.Signing.PrivateKey()
                let newKey = P256.Signing.PrivateKey()
                let keyPath = files.directory.path("vapid.pem")
                try Data(oldKey.pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyPath))
                let file = ConfigFile(path: files.directory.path("pushgate.yaml"))
                @Sendable func yaml(subject: String) -> String {
                    Self.weatherYAML(
                        files,
                        apns: simulator,
                        """
                            webpush: {vapidKey: \(keyPath), subject: "\(subject)", ca: \(webPush.caCertificatePath)}
                        """
                    )
                }
                try file.write(yaml(subject: "mailto:old@pushgate.invalid"))
                try await GatewayFixture.run(try await file.load(), reloadSource: file.reloadSource) { running, _ in
                    func register(_ subscription: WebPushSimulatorSubscription) async throws {
                        let token = DeviceToken(
                            webPush: try WebPushSubscription(jsonBytes: Array(subscription.json.utf8))
                        )
                        _ = try await running.store.register(
                            Registration(app: "weather", token: token, group: "all", at: Date())
                        )
                    }
                    func signers(alert: String) -> [String] {
                        webPush.received().filter { $0.text?.contains(alert) == true }.map {
                            "\($0.vapidPublicKey) \($0.vapidSubject ?? "none")"
                        }
                    }
                    let old = try webPush.createSubscription(applicationServerKey: Self.applicationServerKey(oldKey))
                    try await register(old)
                    let first = try await Self.submit(running, app: "weather", id: "first", alert: "first")
                    #expect(try await Self.waitDone(running, first).accepted == 1)
                    #expect(
                        signers(alert: "first") == ["\(Self.applicationServerKey(oldKey)) mailto:old@pushgate.invalid"]
                    )

                    try Data(newKey.pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyPath))
                    try file.write(yaml(subject: "mailto:new@pushgate.invalid"))
                    await running.reload()
                    #expect(Self.metric(running, #"pushgate_reloads_total{result="ok"}"#) == 1)
                    // The browser subscribed again with the new applicationServerKey; the old subscription
                    // is still registered, and its push service refuses the new key for it.
                    let renewed = try webPush.createSubscription(
                        applicationServerKey: Self.applicationServerKey(newKey)
                    )
                    try await register(renewed)
                    let after = try await Self.submit(running, app: "weather", id: "after", alert: "after")
                    let report = try await Self.waitDone(running, after)
                    #expect(report.accepted == 1)
                    #expect(report.failedByReason == ["webpush_403": 1], "the old subscription: an alarm, not pruned")
                    #expect(
                        signers(alert: "after") == ["\(Self.applicationServerKey(newKey)) mailto:new@pushgate.invalid"]
                    )
                    #expect(webPush.received(subscriptionID: renewed.id).count == 1)
                    let oldToken = try DeviceToken(webPushEndpoint: old.endpoint)
                    #expect(try await running.store.device(app: "weather", token: oldToken)?.state == .valid)

                    // A key file that does not parse: refused, the running key stays.
                    try Data("not a key".utf8).write(to: URL(fileURLWithPath: keyPath))
                    await running.reload()
                    #expect(Self.metric(running, #"pushgate_reloads_total{result="failed"}"#) == 1)
                    let last = try await Self.submit(running, app: "weather", id: "last", alert: "last")
                    #expect(try await Self.waitDone(running, last).accepted == 1)
                    #expect(
                        signers(alert: "last") == ["\(Self.applicationServerKey(newKey)) mailto:new@pushgate.invalid"]
                    )
                }
            }
        }
    }

    /// A gateway with one app, `weather`, on the APNs simulator with a provider token (the fixture's key unless
    /// `keyFile`/`keyID` name another), plus `route` (the app's other keys, indented under it).
    static func weatherYAML(
        _ files: MultiAppFiles,
        apns simulator: RunningAPNsSimulator,
        _ route: String = "",
        keyFile: String? = nil,
        keyID: String = MultiAppFiles.keyID,
        logLevel: String = "info"
    ) -> String {
        """
        logLevel: \(logLevel)
        listen: 127.0.0.1
        udp: {registrationPort: 0, notificationPort: 0}
        http: {port: -1}
        store: {path: \(files.directory.path("gateway.db"))}
        apps: [weather]
        app:
          weather:
            topic: com.example.weather
            apnsHost: "127.0.0.1:\(simulator.port)"
            ca: \(simulator.caCertificatePath!)
            token: {keyFile: \(keyFile ?? files.p8Path), keyId: \(keyID), teamId: \(MultiAppFiles.teamID)}
        \(route)
        """
    }

    /// The public half of a VAPID key as a web page passes it to `subscribe()`.
    static func applicationServerKey(_ key: P256.Signing.PrivateKey) -> String {
        Base64URL.encode(key.publicKey.x963Representation)
    }

    /// A service account of `projectID` named `email` (the simulator's throwaway accounts are named after
    /// their project), known to the simulator's token endpoint.
    static func serviceAccount(
        projectID: String,
        email: String,
        registeredWith fcm: RunningFCMSimulator
    ) throws -> (clientEmail: String, json: [UInt8]) {
        let throwaway = try FCMThrowawayServiceAccount(projectID: projectID, tokenURI: fcm.tokenURI)
        var fields = try #require(
            try JSONSerialization.jsonObject(with: Data(throwaway.jsonBytes)) as? [String: Any]
        )
        fields["client_email"] = email
        var account = throwaway.account
        account.clientEmail = email
        fcm.register(account)
        let json = try JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
        return (email, Array(json))
    }

    // MARK: API keys

    @Test(
        "API keys: a key added to the file works after a reload, a removed one gets 401; a broken file keeps the keys"
    )
    func apiKeyReload() async throws {
        try await GatewayFixture.withSimulator { _, base in
            let directory = try TemporaryDirectory()
            let keys = directory.path("api-keys")
            let oldKey = "old-key-0123456789abcdef"
            let newKey = "new-key-0123456789abcdef"
            try Data("\(oldKey)\n".utf8).write(to: URL(fileURLWithPath: keys))
            var configuration = base
            configuration.http.port = 0
            configuration.apiKeys = [.init(name: "ops", source: .file(keys))]
            let fixed = configuration
            let source = Gateway.ReloadSource(environment: [:]) { () async throws(ConfigurationProblem) in fixed }
            try await GatewayFixture.run(configuration, reloadSource: source) { running, _ in
                let port = try #require(running.httpPort())
                func status(_ key: String) async throws -> String {
                    let (_, output) = try await ExternalTools.runOffPool(
                        "curl",
                        [
                            "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Authorization: Bearer \(key)",
                            "http://127.0.0.1:\(port)/v1/devices/\(Self.device)",
                        ]
                    )
                    return output
                }
                #expect(try await status(oldKey) == Self.authorized)
                #expect(try await status(newKey) == "401")

                try Data("# rotated\n\(newKey)\n".utf8).write(to: URL(fileURLWithPath: keys))
                await running.reload()
                #expect(try await status(newKey) == Self.authorized, "the added key works")
                #expect(try await status(oldKey) == "401", "the removed key is refused")

                try Data("short\n".utf8).write(to: URL(fileURLWithPath: keys))
                await running.reload()
                #expect(try await status(newKey) == Self.authorized, "a broken file keeps the keys")
                #expect(Self.metric(running, #"pushgate_reloads_total{result="ok"}"#) == 1)
                #expect(Self.metric(running, #"pushgate_reloads_total{result="failed"}"#) == 1)
            }
        }
    }

    // MARK: The daemon

    @Test("the daemon: kill -HUP applies a rotated API key file; a broken one is logged and changes nothing")
    func sighupInTheDaemon() async throws {
        let directory = try TemporaryDirectory()
        let keys = directory.path("api-keys")
        let oldKey = "old-key-0123456789abcdef"
        let newKey = "new-key-0123456789abcdef"
        try Data("\(oldKey)\n".utf8).write(to: URL(fileURLWithPath: keys))
        let (process, output) = try CommandLineTests.start(
            ["--http-port", "0", "--api-key-file", keys],
            in: directory
        )
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        let port = Mutex<Int?>(nil)
        try await eventually("the HTTP API listens", timeout: .seconds(60)) {
            if !process.isRunning { throw ExternalTools.ToolError("pushgate exited early:\n\(output.text)") }
            guard let line = output.text.split(separator: "\n").first(where: { $0.contains("HTTP API listening") }),
                let range = line.range(of: #"http\.port=\d+"#, options: .regularExpression)
            else { return false }
            port.withLock { $0 = Int(line[range].dropFirst("http.port=".count)) }
            return true
        }
        let apiPort = try #require(port.withLock { $0 })
        func status(_ key: String) async throws -> String {
            let (_, body) = try await ExternalTools.runOffPool(
                "curl",
                [
                    "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Authorization: Bearer \(key)",
                    "http://127.0.0.1:\(apiPort)/v1/devices/\(Self.device)",
                ]
            )
            return body
        }
        #expect(try await status(oldKey) == Self.authorized)

        try Data("\(newKey)\n".utf8).write(to: URL(fileURLWithPath: keys))
        kill(process.processIdentifier, SIGHUP)
        try await eventually("the keys were reloaded", timeout: .seconds(30)) {
            if !process.isRunning { throw ExternalTools.ToolError("pushgate exited on SIGHUP:\n\(output.text)") }
            return output.text.contains("API keys reloaded")
        }
        #expect(try await status(newKey) == Self.authorized)
        #expect(try await status(oldKey) == "401")

        try Data("".utf8).write(to: URL(fileURLWithPath: keys))
        kill(process.processIdentifier, SIGHUP)
        try await eventually("the failed reload was logged", timeout: .seconds(30)) {
            output.text.contains("configuration not reloaded")
        }
        #expect(output.text.contains("push.reload.key=--api-key-file"), "the line names the flag:\n\(output.text)")
        #expect(process.isRunning)
        #expect(try await status(newKey) == Self.authorized)

        kill(process.processIdentifier, SIGTERM)
        try await eventually("the daemon stopped", timeout: .seconds(30)) { !process.isRunning }
        #expect(process.terminationStatus == 0)
    }

    @Test(
        "the daemon: kill -HUP after renewing an app's certificate; new connections present the renewed one, a broken file changes nothing"
    )
    func sighupRenewsACertificateInTheDaemon() async throws {
        let files = try MultiAppFiles()
        let old = try files.authority.issueClientCertificate(topic: "com.example.news", commonName: "news 2026")
        try old.write(certificateTo: files.certificatePath, privateKeyTo: files.keyPath)
        try await APNsSimulator.withRunning(files.simulatorConfiguration) { simulator in
            let configPath = files.directory.path("pushgate.yaml")
            try Data(
                """
                listen: 127.0.0.1
                udp: {registrationPort: 0, notificationPort: 0}
                http: {port: 0}
                store: {path: \(files.directory.path("daemon.db"))}
                apps: [news]
                app:
                  news:
                    apnsHost: "127.0.0.1:\(simulator.port)"
                    ca: \(simulator.caCertificatePath!)
                    certificate: {file: \(files.certificatePath), key: \(files.keyPath)}
                """.utf8
            ).write(to: URL(fileURLWithPath: configPath))
            let process = SpawnedProcess()
            process.executableURL = URL(fileURLWithPath: GatewayCrashTests.gatewayBinary)
            process.arguments = ["-f", "--config", configPath]
            process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PUSHGATE_") }
            let output = OutputCollector()
            let pipe = Pipe()
            process.standardError = pipe
            process.standardOutput = FileHandle.nullDevice
            pipe.fileHandleForReading.readChunksInBackground({ output.append($0) }, onEnd: { output.end() })
            try process.run()
            defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
            let port = Mutex<Int?>(nil)
            try await eventually("the HTTP API listens", timeout: .seconds(60)) {
                if !process.isRunning { throw ExternalTools.ToolError("pushgate exited early:\n\(output.text)") }
                guard let line = output.text.split(separator: "\n").first(where: { $0.contains("HTTP API listening") }),
                    let range = line.range(of: #"http\.port=\d+"#, options: .regularExpression)
                else { return false }
                port.withLock { $0 = Int(line[range].dropFirst("http.port=".count)) }
                return true
            }
            let api = "http://127.0.0.1:\(try #require(port.withLock { $0 }))"
            func curl(_ arguments: [String]) async throws -> String {
                try await ExternalTools.runOffPool("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}"] + arguments)
                    .1
            }
            #expect(try await curl(["-X", "PUT", "\(api)/v1/groups/all/devices/\(Self.device)"]) == "204")
            func send(_ alert: String) async throws {
                let body = #"{"groups": ["all"], "payload": {"aps": {"alert": "\#(alert)"}}}"#
                #expect(try await curl(["-X", "POST", "-d", body, "\(api)/v1/notifications"]) == "202")
                try await eventually("\(alert) delivered") {
                    simulator.notifications(device: Self.device).contains { $0.payloadString.contains(alert) }
                }
            }
            func names(alert: String) -> [String] {
                let byConnection = simulator.clientCertificateNames()
                return simulator.notifications(device: Self.device).filter { $0.payloadString.contains(alert) }
                    .map { byConnection[$0.connectionID] ?? "none" }
            }
            try await send("before")
            #expect(names(alert: "before") == ["news 2026"])

            let renewed = try files.authority.issueClientCertificate(topic: "com.example.news", commonName: "news 2027")
            try renewed.write(certificateTo: files.certificatePath, privateKeyTo: files.keyPath)
            kill(process.processIdentifier, SIGHUP)
            try await eventually("the certificate was reloaded", timeout: .seconds(30)) {
                if !process.isRunning { throw ExternalTools.ToolError("pushgate exited on SIGHUP:\n\(output.text)") }
                return output.text.contains("APNs credentials reloaded")
            }
            try await send("after")
            #expect(names(alert: "after") == ["news 2027"])

            try Data("garbage".utf8).write(to: URL(fileURLWithPath: files.keyPath))
            kill(process.processIdentifier, SIGHUP)
            try await eventually("the failed reload was logged", timeout: .seconds(30)) {
                output.text.contains("configuration not reloaded")
            }
            #expect(output.text.contains("push.reload.key=app.news.certificate.key"), "\(output.text)")
            simulator.dropAllConnections()
            try await send("after-broken")
            #expect(names(alert: "after-broken") == ["news 2027"])
            #expect(simulator.notifications(device: Self.device).count == 3, "each delivered once")

            kill(process.processIdentifier, SIGTERM)
            try await eventually("the daemon stopped", timeout: .seconds(30)) { !process.isRunning }
            #expect(process.terminationStatus == 0)
        }
    }
}
