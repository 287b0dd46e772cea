import Crypto
import FCMSimulator
import Foundation
import PushgateConfig
import PushgateCore
import Testing

/// `app.NAME.fcm.*`: an app's FCM credentials beside its APNs ones.
@Suite("FCM configuration: keys, flags, validation, service-account files")
struct FCMConfigurationTests {
    static let file = newsAndWeatherFile(
        news: """
                fcm:
                  serviceAccount: /etc/news-firebase.json
                  host: 127.0.0.1:8443
                  tokenUri: https://127.0.0.1:8443/token
                  ca: /etc/fcm-ca.pem
                  pool:
                    maxConnections: 4
                    maxStreams: 50
            """
    )

    @Test("the file's app.NAME.fcm.* keys give the app an FCM route; an app without them has none")
    func fromFile() async throws {
        let folder = try ConfigFolder()
        let configuration = try await load(file: try folder.write("pushgate.yaml", Self.file))
        let fcm = try #require(configuration.apps[0].fcm)
        #expect(fcm.serviceAccountFile == "/etc/news-firebase.json")
        #expect(fcm.host == "127.0.0.1:8443")
        #expect(fcm.tokenURI == "https://127.0.0.1:8443/token")
        #expect(fcm.caFile == "/etc/fcm-ca.pem")
        #expect(fcm.maximumConnections == 4)
        #expect(fcm.maximumStreams == 50)
        #expect(configuration.apps[1].fcm == nil)
        #expect(configuration.apps[0].caFile == nil, "fcm.ca is not APNs's ca")
    }

    @Test("the single-app flags, the environment and generic --app-NAME-fcm-* flags set the same keys")
    func flagsAndEnvironment() async throws {
        let fromFlags = try await load(appFlags: [
            "fcm.serviceAccount": ("/tmp/a.json", "--fcm-service-account"),
            "fcm.host": ("localhost:9000", "--fcm-host"),
            "fcm.tokenUri": ("https://localhost:9000/token", "--fcm-token-uri"),
            "fcm.ca": ("/tmp/ca.pem", "--fcm-ca"),
        ])
        let flagged = try #require(fromFlags.apps[0].fcm)
        #expect(flagged.serviceAccountFile == "/tmp/a.json")
        #expect(flagged.host == "localhost:9000")
        #expect(flagged.tokenURI == "https://localhost:9000/token")
        #expect(flagged.caFile == "/tmp/ca.pem")
        #expect(fromFlags.apps[0].authentication == .certificate(file: "pushd.crt", key: "pushd.key"))

        let fromEnvironment = try await load(environment: [
            "PUSHGATE_APP_DEFAULT_FCM_SERVICE_ACCOUNT": "/tmp/b.json",
            "PUSHGATE_APP_DEFAULT_FCM_TOKEN_URI": "https://oauth.test/token",
            "PUSHGATE_APP_DEFAULT_FCM_POOL_MAX_STREAMS": "20",
        ])
        #expect(fromEnvironment.apps[0].fcm?.serviceAccountFile == "/tmp/b.json")
        #expect(fromEnvironment.apps[0].fcm?.tokenURI == "https://oauth.test/token")
        #expect(fromEnvironment.apps[0].fcm?.maximumStreams == 20)

        let fromArguments = try await load(
            environment: ["PUSHGATE_APP_DEFAULT_FCM_SERVICE_ACCOUNT": "/tmp/b.json"],
            arguments: [
                "--app-default-fcm-pool-max-connections", "2", "--app-default-fcm-service-account", "/tmp/c.json",
            ]
        )
        #expect(fromArguments.apps[0].fcm?.serviceAccountFile == "/tmp/c.json", "a flag over the environment")
        #expect(fromArguments.apps[0].fcm?.maximumConnections == 2)
    }

    @Test("any fcm.* key without fcm.serviceAccount stops start-up, naming the key or flag given")
    func serviceAccountRequired() async {
        let fromFlag = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(appFlags: ["fcm.host": ("localhost:9000", "--fcm-host")])
        }
        #expect(
            fromFlag?.description
                == "--fcm-host: needs app.default.fcm.serviceAccount "
                + "(the service-account JSON file; --fcm-service-account)"
        )
        let fromEnvironment = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(environment: ["PUSHGATE_APP_DEFAULT_FCM_POOL_MAX_STREAMS": "abc"])
        }
        #expect(fromEnvironment?.key == "app.default.fcm.pool.maxStreams")
        let badNumber = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(environment: [
                "PUSHGATE_APP_DEFAULT_FCM_SERVICE_ACCOUNT": "a.json",
                "PUSHGATE_APP_DEFAULT_FCM_POOL_MAX_STREAMS": "abc",
            ])
        }
        #expect(badNumber?.description == "app.default.fcm.pool.maxStreams: must be a whole number (got \"abc\")")
    }

    static var valid: GatewayConfiguration {
        newsCertificateApp { $0.fcm = .init(serviceAccountFile: "news-firebase.json") }
    }

    /// (what breaks it, the one line expected)
    static let cases: [(String, @Sendable (inout GatewayConfiguration) -> Void, String)] = [
        ("empty file", { $0.apps[0].fcm?.serviceAccountFile = "" }, "app.news.fcm.serviceAccount: must not be empty"),
        (
            "host", { $0.apps[0].fcm?.host = "fcm.googleapis.com:https" },
            "app.news.fcm.host: expected HOST[:PORT], got \"fcm.googleapis.com:https\""
        ),
        (
            "plain http token URI", { $0.apps[0].fcm?.tokenURI = "http://oauth2.googleapis.com/token" },
            "app.news.fcm.tokenUri: must be an absolute https URL, or http on loopback (got \"http://oauth2.googleapis.com/token\")"
        ),
        ("empty CA", { $0.apps[0].fcm?.caFile = "" }, "app.news.fcm.ca: must not be empty"),
        (
            "no connections", { $0.apps[0].fcm?.maximumConnections = 0 },
            "app.news.fcm.pool.maxConnections: must be at least 1"
        ),
        ("no streams", { $0.apps[0].fcm?.maximumStreams = 0 }, "app.news.fcm.pool.maxStreams: must be at least 1"),
        (
            "FCM-only app", { $0.apps[0].authentication = nil },
            "app.news.certificate.file: no APNs credentials: an app with fcm.* needs APNs credentials too "
                + "(FCM-only apps are not supported)"
        ),
    ]

    @Test("each broken FCM value stops start-up with one line naming its key", arguments: cases.indices)
    func failure(_ index: Int) throws {
        try Self.valid.validate()
        let (what, breakIt, expected) = Self.cases[index]
        var configuration = Self.valid
        breakIt(&configuration)
        #expect(throws: ConfigurationProblem.self, "\(what)") { try configuration.validate() }
        do {
            try configuration.validate()
        } catch {
            #expect(error.description == expected, "\(what)")
        }
    }

    @Test("a problem set by --fcm-host names the flag")
    func flagNamed() {
        var configuration = Self.valid
        configuration.apps[0].fcm?.host = "fcm.test:https"
        configuration.flagNames = ["app.news.fcm.host": "--fcm-host"]
        #expect(throws: ConfigurationProblem(key: "--fcm-host", "expected HOST[:PORT], got \"fcm.test:https\"")) {
            try configuration.validate()
        }
    }

    /// A token app (a fresh P-256 key, so no certificate is needed) with the given FCM route.
    static func loadable(_ folder: ConfigFolder, fcm: GatewayConfiguration.App.FCM) throws -> GatewayConfiguration {
        try newsTokenApp(folder) { $0.fcm = fcm }
    }

    @Test("a service-account file is read and parsed at start-up: project, endpoint, trust and pool limits")
    func loadsServiceAccount() throws {
        let folder = try ConfigFolder()
        let account = try FCMThrowawayServiceAccount(projectID: "news-project", tokenURI: "https://127.0.0.1:9/token")
        let path = folder.url.appendingPathComponent("news-firebase.json").path
        try account.write(to: path)
        var fcm = GatewayConfiguration.App.FCM(serviceAccountFile: path)
        fcm.maximumStreams = 40

        let google = try #require(try Self.loadable(folder, fcm: fcm).loadCredentials(environment: [:]).apps[0].fcm)
        #expect(google.serviceAccount.projectID == "news-project")
        #expect(google.serviceAccount.clientEmail == account.clientEmail)
        #expect(google.endpoint == LoadedFCM.googleEndpoint)
        #expect(google.tokenURI == nil, "the file's token_uri")
        #expect(google.maximumStreams == 40)
        #expect(google.maximumConnections == 16)
        guard case .system = google.trustRoots else {
            Issue.record("Google's endpoint is checked against the system store")
            return
        }

        fcm.host = "127.0.0.1:8443"
        fcm.tokenURI = "https://127.0.0.1:8443/token"
        fcm.caFile = try folder.write("ca.pem", "not checked until connecting")
        let simulated = try #require(try Self.loadable(folder, fcm: fcm).loadCredentials(environment: [:]).apps[0].fcm)
        #expect(simulated.endpoint.host == "127.0.0.1")
        #expect(simulated.endpoint.port == 8443)
        #expect(simulated.tokenURI == "https://127.0.0.1:8443/token")
        guard case .caFile(let ca) = simulated.trustRoots, ca == fcm.caFile else {
            Issue.record("fcm.ca is the FCM route's trust")
            return
        }
    }

    @Test("an unreadable, malformed or keyless service-account file is refused naming the key, never the key material")
    func badServiceAccounts() throws {
        let folder = try ConfigFolder()
        let account = try FCMThrowawayServiceAccount(tokenURI: "https://127.0.0.1:9/token")
        var fields = try #require(
            try JSONSerialization.jsonObject(with: Data(account.jsonBytes)) as? [String: String]
        )
        func problem(_ fcm: GatewayConfiguration.App.FCM) throws -> ConfigurationProblem? {
            let configuration = try Self.loadable(folder, fcm: fcm)
            do {
                _ = try configuration.loadCredentials(environment: [:])
                return nil
            } catch {
                return error
            }
        }
        func file(_ name: String, _ fields: [String: String]) throws -> String {
            let data = try JSONSerialization.data(withJSONObject: fields)
            return try folder.write(name, String(decoding: data, as: UTF8.self))
        }

        let missing = try problem(.init(serviceAccountFile: "/nonexistent/firebase.json"))
        #expect(missing?.description == "app.news.fcm.serviceAccount: cannot read /nonexistent/firebase.json")

        let notJSON = try folder.write("not-json.json", "project_id: x")
        #expect(
            try problem(.init(serviceAccountFile: notJSON))?.description
                == "app.news.fcm.serviceAccount: \(notJSON): service-account file is not a JSON object"
        )

        fields["private_key"] = nil
        let keyless = try file("keyless.json", fields)
        #expect(
            try problem(.init(serviceAccountFile: keyless))?.description
                == "app.news.fcm.serviceAccount: \(keyless): "
                + "service-account field private_key is missing, empty or not a string"
        )

        // A key that is not an RSA key: the problem says so without quoting it.
        let wrongKey = P256.Signing.PrivateKey().pemRepresentation
        fields["private_key"] = wrongKey
        let ecKey = try file("ec-key.json", fields)
        let ecProblem = try #require(try problem(.init(serviceAccountFile: ecKey)))
        #expect(ecProblem.key == "app.news.fcm.serviceAccount")
        #expect(ecProblem.message.contains("private_key is not an RSA private key"))
        #expect(!ecProblem.description.contains("PRIVATE KEY"))
        #expect(!ecProblem.description.contains(String(wrongKey.split(separator: "\n")[1].prefix(20))))

        fields["private_key"] = account.privateKeyPEM
        var withCA = GatewayConfiguration.App.FCM(serviceAccountFile: try file("good.json", fields))
        withCA.caFile = "/nonexistent/ca.pem"
        #expect(try problem(withCA)?.description == "app.news.fcm.ca: cannot read /nonexistent/ca.pem")
    }
}
