import Foundation
import PushgateConfig
import PushgateCore
import Testing

@Suite("Configuration loading: file, environment, flags")
struct ConfigurationLoaderTests {
    static let twoApps = """
        listen: 10.0.0.1
        udp:
          registrationPort: 1111
          notificationPort: 1112
        http:
          port: 2222
        logLevel: debug
        instanceId: from-file
        apps: [news, weather]
        app:
          news:
            topic: com.example.news
            certificate:
              file: /etc/news.crt
              key: /etc/news.key
          weather:
            topic: com.example.weather
            environment: sandbox
            token:
              keyFile: /etc/weather.p8
              keyId: KEY1234567
              teamId: TEAM123456
            pool:
              maxConnections: 3
        """

    @Test("with nothing given, the defaults are the C pushd's, for one app named default with pushd.crt and pushd.key")
    func defaults() async throws {
        let configuration = try await load()
        #expect(configuration.listen == "localhost")
        #expect(configuration.udp.registrationPort == 7734)
        #expect(configuration.udp.notificationPort == 7874)
        #expect(configuration.http.port == 7880)
        #expect(configuration.store.path == "pushgate.db")
        #expect(configuration.instanceID == nil, "chosen by the store at start")
        #expect(configuration.apps.map(\.name) == [Registration.defaultApp])
        #expect(configuration.apps[0].authentication == .certificate(file: "pushd.crt", key: "pushd.key"))
        #expect(configuration.apps[0].pool == GatewayConfiguration.App.Pool())
        #expect(configuration.apps[0].pool.maximumConnections == 16, "16 x 1,000 streams: 100,000/s up to 160 ms")
        #expect(configuration.apps[0].pool.maximumStreams == nil, "as many streams as the server allows")
        #expect(configuration.apiKeys.isEmpty)
    }

    @Test("store.minimumFreeBytes: the store's default unless given, a whole number of bytes")
    func minimumFreeBytes() async throws {
        #expect(try await load().store.minimumFreeBytes == nil, "the store's default, 32 MiB")
        let given = try await load(environment: ["PUSHGATE_STORE_MINIMUM_FREE_BYTES": "1073741824"])
        #expect(given.store.minimumFreeBytes == 1 << 30)
        let notANumber = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(environment: ["PUSHGATE_STORE_MINIMUM_FREE_BYTES": "1GB"])
        }
        #expect(notANumber?.message.contains("must be a whole number") == true, "\(String(describing: notANumber))")
    }

    @Test("store.retention: a week unless given; seconds or a number with s, m, h or d; off keeps every request")
    func retention() async throws {
        #expect(try await load().store.retentionSeconds == 7 * 86400, "a week")
        let spellings = ["7d": 7 * 86400, "36h": 36 * 3600, "1440m": 86400, "90000": 90000, "86400s": 86400]
        for (text, seconds) in spellings {
            let given = try await load(environment: ["PUSHGATE_STORE_RETENTION": text])
            #expect(given.store.retentionSeconds == seconds, "\(text)")
        }
        #expect(try await load(environment: ["PUSHGATE_STORE_RETENTION": "off"]).store.retentionSeconds == 0)
        #expect(try await load(environment: ["PUSHGATE_STORE_RETENTION": "0"]).store.retentionSeconds == 0)
        #expect(try await load(arguments: ["--store-retention", "30d"]).store.retentionSeconds == 30 * 86400)
        let tooShort = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(environment: ["PUSHGATE_STORE_RETENTION": "12h"])
        }
        #expect(tooShort?.key == "store.retention")
        #expect(tooShort?.message.contains("at least 1d") == true, "\(String(describing: tooShort))")
        let notADuration = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(environment: ["PUSHGATE_STORE_RETENTION": "a week"])
        }
        #expect(notADuration?.key == "store.retention")
        #expect(notADuration?.message.contains("must be a duration") == true, "\(String(describing: notADuration))")
    }

    @Test("max streams: a cap from the file, the environment or a flag; validated when given")
    func maximumStreamsCap() async throws {
        let fromEnvironment = try await load(environment: ["PUSHGATE_APP_DEFAULT_POOL_MAX_STREAMS": "500"])
        #expect(fromEnvironment.apps[0].pool.maximumStreams == 500)
        let fromFlag = try await load(
            environment: ["PUSHGATE_APP_DEFAULT_POOL_MAX_STREAMS": "500"],
            appFlags: ["pool.maxStreams": ("250", "--max-streams")]
        )
        #expect(fromFlag.apps[0].pool.maximumStreams == 250, "--max-streams over the environment")
        let zero = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(appFlags: ["pool.maxStreams": ("0", "--max-streams")])
        }
        #expect(zero == ConfigurationProblem(key: "--max-streams", "must be at least 1"))
    }

    @Test("flags win over the environment, the environment over the file, the file over the defaults")
    func precedence() async throws {
        let folder = try ConfigFolder()
        let file = try folder.write("pushgate.yaml", Self.twoApps)
        let environment = [
            "PUSHGATE_UDP_REGISTRATION_PORT": "3333", "PUSHGATE_LOG_LEVEL": "notice",
            "PUSHGATE_APP_WEATHER_POOL_MAX_CONNECTIONS": "5",
            "PUSHGATE_INSTANCE_ID": "from-env",
        ]

        let fileOnly = try await load(file: file)
        #expect(fileOnly.listen == "10.0.0.1")
        #expect(fileOnly.udp.registrationPort == 1111)
        #expect(fileOnly.logLevel == "debug")
        #expect(fileOnly.apps[1].pool.maximumConnections == 3)

        let withEnvironment = try await load(file: file, environment: environment)
        #expect(withEnvironment.udp.registrationPort == 3333)
        #expect(withEnvironment.logLevel == "notice")
        #expect(withEnvironment.apps[1].pool.maximumConnections == 5)
        #expect(withEnvironment.udp.notificationPort == 1112, "keys the environment does not set come from the file")

        let withFlags = try await load(
            file: file,
            environment: environment,
            flags: ["udp.registrationPort": ("4444", "-g")],
            arguments: ["--app-weather-pool-max-connections", "7", "--instance-id", "from-flag"]
        )
        #expect(withFlags.udp.registrationPort == 4444)
        #expect(withFlags.apps[1].pool.maximumConnections == 7)
        #expect(withFlags.instanceID == "from-flag")
        #expect(withFlags.logLevel == "notice")
        #expect(withFlags.http.port == 2222)
        #expect(withFlags.store.path == "pushgate.db", "nobody set it: the default")
    }

    @Test("the config file can come from PUSHGATE_CONFIG, and --config wins over it")
    func configFileFromEnvironment() async throws {
        let folder = try ConfigFolder()
        let first = try folder.write("a.yaml", "listen: 10.0.0.1\n")
        let second = try folder.write("b.yaml", "listen: 10.0.0.2\n")
        #expect(try await load(environment: ["PUSHGATE_CONFIG": first]).listen == "10.0.0.1")
        #expect(try await load(file: second, environment: ["PUSHGATE_CONFIG": first]).listen == "10.0.0.2")
    }

    @Test("the C pushd's flags set the single app's keys, over the file's values for that app")
    func pushdFlagsMapOntoTheSingleApp() async throws {
        let folder = try ConfigFolder()
        let file = try folder.write(
            "one.yaml",
            """
            apps: [shop]
            app:
              shop:
                topic: com.example.shop
                certificate: {file: /etc/shop.crt, key: /etc/shop.key}
                pool: {rate: 2}
            """
        )
        let configuration = try await load(
            file: file,
            appFlags: [
                "certificate.file": ("/tmp/pushd.crt", "-c"), "environment": ("sandbox", "-s"),
                "pool.rate": ("5", "-r"),
                "pool.pingMinutes": ("0", "-t"), "alternativePort": ("true", "-p"),
            ]
        )
        let app = try #require(configuration.apps.first)
        #expect(app.name == "shop")
        #expect(app.authentication == .certificate(file: "/tmp/pushd.crt", key: "/etc/shop.key"))
        #expect(app.environment == .sandbox)
        #expect(app.alternativePort)
        #expect(app.pool.rate == 5)
        #expect(app.pool.pingMinutes == 0)
        #expect(app.topic == "com.example.shop")
    }

    @Test("-c without -k reads the key from pushd.key, as pushd did; a certificate from the file may hold its key")
    func pushdKeyDefault() async throws {
        let fromFlag = try await load(appFlags: ["certificate.file": ("/tmp/my.crt", "-c")])
        #expect(fromFlag.apps[0].authentication == .certificate(file: "/tmp/my.crt", key: "pushd.key"))
        let fromEnvironment = try await load(environment: ["PUSHGATE_APP_DEFAULT_CERTIFICATE_FILE": "/tmp/combined.pem"]
        )
        #expect(fromEnvironment.apps[0].authentication == .certificate(file: "/tmp/combined.pem", key: nil))
    }

    @Test("the single-app flags are refused when several apps are configured, naming the flag")
    func appFlagsNeedOneApp() async throws {
        let folder = try ConfigFolder()
        let file = try folder.write("two.yaml", Self.twoApps)
        let found = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(file: file, appFlags: ["certificate.file": ("x.crt", "-c")])
        }
        #expect(
            found?.description
                == "-c: the command line's app flags configure a single app, but 2 apps are configured (news, weather); use app.NAME.* keys"
        )
    }

    @Test("the example configuration in the repository loads and says what its comments say")
    func exampleConfiguration() async throws {
        let path = repositoryRoot.appendingPathComponent("examples/pushgate.yaml").path
        let configuration = try await load(file: path)
        #expect(configuration.listen == "0.0.0.0")
        #expect(configuration.store.path == "/var/lib/pushgate/pushgate.db")
        #expect(configuration.instanceID == "pushgate-1")
        #expect(configuration.apps.map(\.name) == ["news", "weather"])
        let news = configuration.apps[0]
        #expect(news.topic == "com.example.news")
        #expect(news.environment == .production)
        #expect(news.authentication == .certificate(file: "/etc/pushgate/news.crt", key: "/etc/pushgate/news.key"))
        #expect(news.pool.maximumConnections == 16)
        #expect(news.pool.maximumStreams == nil, "the example leaves the streams to the server")
        #expect(news.transport == .http2)
        let weather = configuration.apps[1]
        #expect(weather.environment == .sandbox)
        #expect(
            weather.authentication
                == .token(keyFile: "/etc/pushgate/AuthKey_ABC123DEFG.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        )
        #expect(weather.pool.maximumConnections == 4)
        #expect(configuration.apiKeys.map(\.name) == ["backend", "news-publisher"])
        #expect(configuration.apiKeys[0].source == .file("/etc/pushgate/backend.keys"))
        #expect(configuration.apiKeys[1].app == "news")
        #expect(configuration.http.effectiveHost(listen: configuration.listen, hasKeys: true) == "0.0.0.0")
    }

    @Test("generic --key flags are checked against the known keys: a typo stops start-up")
    func unknownArgumentsAreRefused() async {
        let typo = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(arguments: ["--udp-registraton-port", "1"])
        }
        #expect(typo?.description == "--udp-registraton-port: unknown flag (no configuration key is spelled so)")
        let otherApp = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(arguments: ["--app-news-topic", "x"])
        }
        #expect(otherApp?.key == "--app-news-topic", "app news is not configured")
        let stray = await problem { () async throws(ConfigurationProblem) in _ = try await load(arguments: ["stray"]) }
        #expect(stray?.description == "stray: unexpected argument")
    }

    @Test("values that do not convert name their key, or the flag that set them")
    func unconvertibleValues() async throws {
        let fromEnvironment = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(environment: ["PUSHGATE_UDP_REGISTRATION_PORT": "abc"])
        }
        #expect(fromEnvironment?.description == "udp.registrationPort: must be a whole number (got \"abc\")")
        let fromFlag = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(flags: ["udp.registrationPort": ("abc", "-g")])
        }
        #expect(fromFlag?.description == "-g: must be a whole number (got \"abc\")")
        let environmentName = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(appFlags: ["environment": ("staging", "-s")])
        }
        #expect(environmentName?.description == "-s: must be production or sandbox (got \"staging\")")
        let transport = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(environment: ["PUSHGATE_APP_DEFAULT_TRANSPORT": "http3"])
        }
        #expect(transport?.description == "app.default.transport: must be http2 or legacy (got \"http3\")")
        let flag = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(environment: ["PUSHGATE_APP_DEFAULT_ALTERNATIVE_PORT": "maybe"])
        }
        #expect(flag?.description == "app.default.alternativePort: must be true or false (got \"maybe\")")
    }

    @Test("token fields must come together, and not with a certificate")
    func incompleteToken() async throws {
        let missingTeam = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(appFlags: [
                "token.keyFile": ("k.p8", "--auth-key"), "token.keyId": ("KEY1234567", "--key-id"),
            ])
        }
        #expect(missingTeam?.description == "app.default.token.teamId: missing: token authentication needs the team id")
        let missingKeyID = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(environment: [
                "PUSHGATE_APP_DEFAULT_TOKEN_KEY_FILE": "k.p8", "PUSHGATE_APP_DEFAULT_TOKEN_TEAM_ID": "T",
            ])
        }
        #expect(missingKeyID?.description == "app.default.token.keyId: missing: token authentication needs the key id")
        let both = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(appFlags: [
                "certificate.file": ("c.pem", "-c"), "token.keyFile": ("k.p8", "--auth-key"),
                "token.keyId": ("K", "--key-id"),
                "token.teamId": ("T", "--team-id"),
            ])
        }
        #expect(both?.description == "-c: give a certificate or a token (token.*), not both")
    }

    @Test("a missing or malformed config file stops start-up naming the file")
    func badFiles() async throws {
        let missing = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(file: "/nonexistent/pushgate.yaml")
        }
        #expect(missing?.description == "--config: cannot read /nonexistent/pushgate.yaml")
        let folder = try ConfigFolder()
        let broken = try folder.write("broken.yaml", "apps: [a\n  b: {")
        let malformed = await problem { () async throws(ConfigurationProblem) in _ = try await load(file: broken) }
        #expect(malformed?.key == "--config")
        #expect(malformed?.message.hasPrefix("\(broken) is not a usable YAML configuration") == true)
        let listOfMaps = try folder.write("list.yaml", "apps:\n  - name: a\n")
        let unsupported = await problem { () async throws(ConfigurationProblem) in _ = try await load(file: listOfMaps)
        }
        #expect(unsupported?.key == "--config", "apps are a list of names, described under app.NAME")
    }

    @Test("apps and API keys can be named in the environment as comma-separated lists")
    func listsFromEnvironment() async throws {
        let configuration = try await load(environment: [
            "PUSHGATE_APPS": "a,b",
            "PUSHGATE_APP_A_CERTIFICATE_FILE": "a.pem", "PUSHGATE_APP_B_CERTIFICATE_FILE": "b.pem",
            "PUSHGATE_API_KEYS": "ops", "PUSHGATE_API_KEY_OPS_HASH": "sha256:" + String(repeating: "ab", count: 32),
            "PUSHGATE_API_KEY_OPS_APP": "b",
        ])
        #expect(configuration.apps.map(\.name) == ["a", "b"])
        #expect(configuration.apps[1].authentication == .certificate(file: "b.pem", key: nil))
        #expect(
            configuration.apiKeys == [
                .init(name: "ops", source: .hash("sha256:" + String(repeating: "ab", count: 32)), app: "b")
            ]
        )
    }
}
