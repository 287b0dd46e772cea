import APNsHTTP2
import APNsSimulator
import Crypto
import Foundation
import Logging
import PushgateConfig
import PushgateCore
import PushgateDispatch
import PushgateGateway
import PushgateUDP
import Testing

/// Credentials on disk for several apps, and a simulator that accepts them: a client certificate from
/// the simulator's CA (subject UID = the news app's bundle id) and one provider-token key.
struct MultiAppFiles: Sendable {
    static let keyID = "KEY1234567"
    static let teamID = "TEAM123456"

    let directory: TemporaryDirectory
    let authority: SimulatorCertificateAuthority
    let tokenKey: P256.Signing.PrivateKey
    let certificatePath: String
    let keyPath: String
    let p8Path: String

    init() throws {
        directory = try TemporaryDirectory()
        authority = try SimulatorCertificateAuthority()
        let issued = try authority.issueClientCertificate(topic: "com.example.news")
        certificatePath = directory.path("news.crt")
        keyPath = directory.path("news.key")
        try issued.write(certificateTo: certificatePath, privateKeyTo: keyPath)
        tokenKey = P256.Signing.PrivateKey()
        p8Path = directory.path("AuthKey.p8")
        try Data(tokenKey.pemRepresentation.utf8).write(to: URL(fileURLWithPath: p8Path))
    }

    var simulatorConfiguration: APNsSimulator.Configuration {
        var configuration = APNsSimulator.Configuration()
        configuration.tls = .authority(authority)
        configuration.clientCertificateAuthorityPEM = authority.certificatePEM
        configuration.tokenKeys = [
            ProviderTokenKey(keyID: Self.keyID, teamID: Self.teamID, publicKey: tokenKey.publicKey)
        ]
        configuration.logger = TestLogger.make("simulator")
        return configuration
    }

    /// Three apps: news by certificate, weather and maps by token of the same team and key.
    func yaml(simulator: RunningAPNsSimulator) -> String {
        let endpoint = "127.0.0.1:\(simulator.port)"
        let ca = simulator.caCertificatePath!
        return """
            listen: 127.0.0.1
            udp: {registrationPort: 0, notificationPort: 0}
            http: {port: -1}
            store: {path: \(directory.path("gateway.db"))}
            instanceId: multi-app-test
            apps: [news, weather, maps]
            app:
              news:
                apnsHost: "\(endpoint)"
                ca: \(ca)
                certificate: {file: \(certificatePath), key: \(keyPath)}
                pool: {maxConnections: 2}
              weather:
                topic: com.example.weather
                apnsHost: "\(endpoint)"
                ca: \(ca)
                token: {keyFile: \(p8Path), keyId: \(Self.keyID), teamId: \(Self.teamID)}
              maps:
                topic: com.example.maps
                apnsHost: "\(endpoint)"
                ca: \(ca)
                token: {keyFile: \(p8Path), keyId: \(Self.keyID), teamId: \(Self.teamID)}
            """
    }
}

@Suite("Several apps in one gateway", .serialized, .timeLimit(.minutes(3)))
struct MultiAppTests {
    static func token(_ app: Int, _ index: Int) -> String { String(format: "%02x%062x", app, index) }

    @Test(
        "each app reaches APNs with its own credentials and topic; apps never share a connection; apps of one team share one provider token"
    )
    func threeApps() async throws {
        let files = try MultiAppFiles()
        try await APNsSimulator.withRunning(files.simulatorConfiguration) { simulator in
            let path = files.directory.path("pushgate.yaml")
            try Data(files.yaml(simulator: simulator).utf8).write(to: URL(fileURLWithPath: path))
            let configuration = try await ConfigurationLoader(commandLine: .init(configFile: path), environment: [:])
                .load()
            try await GatewayFixture.run(configuration) { running, built in
                #expect(
                    built.apps.map(\.topic.bundleID) == ["com.example.news", "com.example.weather", "com.example.maps"]
                )
                let registration = try UDPSender(port: running.udp.registrationPort)
                let notification = try UDPSender(port: running.udp.notificationPort)

                let apps = ["news", "weather", "maps"]
                let perApp = 20
                for (appIndex, app) in apps.enumerated() {
                    for index in 0..<perApp {
                        registration.send(
                            #"{"device": "\#(Self.token(appIndex, index))", "group": "all", "app": "\#(app)"}"#
                        )
                    }
                }
                try await eventually("registrations applied") {
                    for (appIndex, app) in apps.enumerated() {
                        let last = try DeviceToken(hex: Self.token(appIndex, perApp - 1))
                        if try await running.store.device(app: app, token: last) == nil { return false }
                    }
                    return true
                }
                for app in apps {
                    notification.send(
                        #"{"app": "\#(app)", "groups": ["all"], "type": "normal", "payload": {"aps": {"alert": "\#(app)"}}}"#
                    )
                }
                try await eventually("every app's devices reached") {
                    simulator.stats().accepted >= apps.count * perApp
                }

                let recorded = simulator.notifications()
                #expect(recorded.count == apps.count * perApp)
                var connections: [String: Set<Int>] = [:]
                var bearer: [String: Set<String>] = [:]
                for (appIndex, app) in apps.enumerated() {
                    let mine = recorded.filter { $0.deviceToken.hasPrefix(String(format: "%02x", appIndex)) }
                    #expect(mine.count == perApp, "\(app)")
                    #expect(Set(mine.map(\.topic)) == ["com.example.\(app)"], "\(app) sends its own topic")
                    #expect(
                        mine.allSatisfy { $0.payloadString.contains("\"\(app)\"") },
                        "\(app) delivers its own payload"
                    )
                    connections[app] = Set(mine.map(\.connectionID))
                    bearer[app] = Set(mine.map { $0.headers["authorization"] ?? "none" })
                }
                // news authenticates with its certificate (the simulator checks the topic against the
                // certificate's UID), the token apps with a bearer token.
                #expect(bearer["news"] == ["none"])
                let weatherToken = try #require(bearer["weather"]?.first)
                #expect(weatherToken.hasPrefix("bearer "))
                #expect(bearer["weather"]?.count == 1)
                #expect(bearer["maps"] == bearer["weather"], "one team and key: one provider token")
                #expect(connections["news"]!.isDisjoint(with: connections["weather"]!))
                #expect(connections["news"]!.isDisjoint(with: connections["maps"]!))
                #expect(connections["weather"]!.isDisjoint(with: connections["maps"]!), "apps never share a connection")
                #expect(simulator.stats().rejected == 0)
            }
        }
    }

    @Test("with a single app named in the file, pushd's app-less datagrams are that app's")
    func singleNamedApp() async throws {
        let files = try MultiAppFiles()
        try await APNsSimulator.withRunning(files.simulatorConfiguration) { simulator in
            let path = files.directory.path("one.yaml")
            let yaml = """
                listen: 127.0.0.1
                udp: {registrationPort: 0, notificationPort: 0}
                http: {port: -1}
                store: {path: \(files.directory.path("one.db"))}
                apps: [weather]
                app:
                  weather:
                    topic: com.example.weather
                    apnsHost: "127.0.0.1:\(simulator.port)"
                    ca: \(simulator.caCertificatePath!)
                    token: {keyFile: \(files.p8Path), keyId: \(MultiAppFiles.keyID), teamId: \(MultiAppFiles.teamID)}
                """
            try Data(yaml.utf8).write(to: URL(fileURLWithPath: path))
            let configuration = try await ConfigurationLoader(commandLine: .init(configFile: path), environment: [:])
                .load()
            try await GatewayFixture.run(configuration) { running, _ in
                let device = Self.token(1, 1)
                try UDPSender(port: running.udp.registrationPort).send(#"{"device": "\#(device)", "group": "G"}"#)
                try await eventually("registered as a weather device") {
                    try await running.store.device(app: "weather", token: DeviceToken(hex: device)) != nil
                }
                #expect(
                    try await running.store.device(app: Registration.defaultApp, token: DeviceToken(hex: device)) == nil
                )
                try UDPSender(port: running.udp.notificationPort).send(
                    #"{"groups": ["G"], "type": "normal", "payload": {"aps": {}}}"#
                )
                try await eventually("delivered") { !simulator.notifications(device: device).isEmpty }
                #expect(simulator.notifications(device: device).first?.topic == "com.example.weather")
            }
        }
    }
}

@Suite("Configuration: credentials checked at start-up")
struct ConfigurationCredentialTests {
    func configuration(
        _ files: MultiAppFiles,
        _ change: (inout GatewayConfiguration.App) -> Void
    ) -> GatewayConfiguration {
        var configuration = GatewayConfiguration()
        var app = GatewayConfiguration.App(
            name: "news",
            authentication: .certificate(file: files.certificatePath, key: files.keyPath)
        )
        change(&app)
        configuration.apps = [app]
        return configuration
    }

    func problem(
        _ configuration: GatewayConfiguration,
        environment: [String: String] = [:],
        clock: any WallClock = SystemWallClock()
    ) -> String? {
        do {
            _ = try configuration.loadCredentials(environment: environment, clock: clock)
            return nil
        } catch {
            return error.description
        }
    }

    @Test("good files load; the topic defaults to the certificate's UID")
    func good() throws {
        let files = try MultiAppFiles()
        let loaded = try configuration(files) { _ in }.loadCredentials(environment: [:])
        #expect(loaded.apps[0].topic.bundleID == "com.example.news")
        #expect(loaded.apps[0].client.endpoint == .apple(.production))
    }

    @Test("unreadable files, unparsable keys and expired certificates each stop start-up with one line naming the key")
    func failures() throws {
        let files = try MultiAppFiles()
        let garbage = files.directory.path("garbage.pem")
        try Data("not a key\n".utf8).write(to: URL(fileURLWithPath: garbage))

        #expect(
            problem(
                configuration(files) { $0.authentication = .certificate(file: "/nonexistent.crt", key: files.keyPath) }
            )
                == "app.news.certificate.file: cannot read /nonexistent.crt"
        )
        #expect(
            problem(
                configuration(files) {
                    $0.authentication = .certificate(file: files.certificatePath, key: "/nonexistent.key")
                }
            )
                == "app.news.certificate.key: cannot read /nonexistent.key"
        )
        #expect(
            problem(
                configuration(files) { $0.authentication = .certificate(file: files.certificatePath, key: garbage) }
            )
                == "app.news.certificate.key: cannot read private key (unencrypted PEM) from \(garbage)"
        )
        #expect(
            problem(configuration(files) { $0.authentication = .certificate(file: garbage, key: files.keyPath) })
                == "app.news.certificate.file: cannot read client certificate (PEM) from \(garbage)"
        )
        #expect(
            problem(configuration(files) { $0.authentication = .pkcs12(file: garbage, passphraseEnvironment: "P") })
                == "app.news.certificate.p12: cannot read PKCS#12 bundle (wrong passphrase?) from \(garbage)"
        )
        #expect(
            problem(configuration(files) { $0.caFile = "/nonexistent-ca.pem" })
                == "app.news.ca: cannot read /nonexistent-ca.pem"
        )

        let later = ManualWallClock(Date().addingTimeInterval(400 * 86_400))
        let expired = try #require(problem(configuration(files) { _ in }, clock: later))
        #expect(expired.hasPrefix("app.news.certificate.file: the certificate expired on "))

        func token(_ keyFile: String) -> (inout GatewayConfiguration.App) -> Void {
            { app in
                app.authentication = .token(keyFile: keyFile, keyID: MultiAppFiles.keyID, teamID: MultiAppFiles.teamID)
                app.topic = "com.example.news"
            }
        }
        #expect(
            problem(configuration(files, token("/nonexistent.p8")))
                == "app.news.token.keyFile: cannot read /nonexistent.p8"
        )
        #expect(
            problem(configuration(files, token(garbage)))
                == "app.news.token.keyFile: \(garbage): auth key is not a P-256 private key in PEM form"
        )
    }

    @Test("a .p12 bundle loads with the passphrase from the variable the app names; a wrong passphrase stops start-up")
    func pkcs12() throws {
        try #require(ExternalTools.isInstalled("openssl"), "openssl makes the bundle")
        let files = try MultiAppFiles()
        let bundle = files.directory.path("news.p12")
        let made = try ExternalTools.run(
            "openssl",
            [
                "pkcs12", "-export", "-in", files.certificatePath, "-inkey", files.keyPath, "-out", bundle, "-passout",
                "pass:p12-secret",
            ]
        )
        try #require(made.status == 0, "\(made.output)")
        let configuration = configuration(files) {
            $0.authentication = .pkcs12(file: bundle, passphraseEnvironment: "NEWS_P12")
        }
        let loaded = try configuration.loadCredentials(environment: ["NEWS_P12": "p12-secret"])
        #expect(loaded.apps[0].topic.bundleID == "com.example.news", "the topic comes from the bundle's certificate")
        let wrong = try #require(problem(configuration, environment: ["NEWS_P12": "not-it"]))
        #expect(wrong == "app.news.certificate.p12: cannot read PKCS#12 bundle (wrong passphrase?) from \(bundle)")
        #expect(!wrong.contains("not-it"))
    }

    @Test("two apps naming one key id with different keys are refused")
    func sameKeyIDDifferentKey() throws {
        let files = try MultiAppFiles()
        let otherKey = files.directory.path("Other.p8")
        try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: otherKey))
        var configuration = GatewayConfiguration()
        for (name, file) in [("a", files.p8Path), ("b", otherKey)] {
            var app = GatewayConfiguration.App(
                name: name,
                authentication: .token(keyFile: file, keyID: MultiAppFiles.keyID, teamID: MultiAppFiles.teamID)
            )
            app.topic = "com.example.\(name)"
            configuration.apps.append(app)
        }
        #expect(
            problem(configuration)
                == "app.b.token.keyFile: another app uses key id \(MultiAppFiles.keyID) of team \(MultiAppFiles.teamID) with a different key file content"
        )
    }
}
