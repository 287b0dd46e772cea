import PushgateConfig
import PushgateCore
import Testing

/// Start-up checks that need no file: each broken value stops start-up with one line naming the key.
@Suite("Configuration validation (pure)")
struct ConfigurationValidationTests {
    /// Two valid apps (one certificate, one token) and a key limited to one of them.
    static var valid: GatewayConfiguration {
        var configuration = GatewayConfiguration()
        var news = GatewayConfiguration.App(
            name: "news",
            authentication: .certificate(file: "news.crt", key: "news.key")
        )
        news.topic = "com.example.news"
        var weather = GatewayConfiguration.App(
            name: "weather",
            authentication: .token(keyFile: "weather.p8", keyID: "KEY1234567", teamID: "TEAM123456")
        )
        weather.topic = "com.example.weather"
        configuration.apps = [news, weather]
        configuration.apiKeys = [
            .init(name: "ops", source: .hash("sha256:" + String(repeating: "0f", count: 32)), app: "news")
        ]
        return configuration
    }

    static let hash = "sha256:" + String(repeating: "0f", count: 32)

    /// (what breaks it, the one line expected)
    static let cases: [(String, @Sendable (inout GatewayConfiguration) -> Void, String)] = [
        ("empty listen", { $0.listen = "" }, "listen: must not be empty"),
        (
            "registration port", { $0.udp.registrationPort = 70_000 },
            "udp.registrationPort: 70000 is not a port number (0 to 65535)"
        ),
        (
            "notification port", { $0.udp.notificationPort = -2 },
            "udp.notificationPort: -2 is not a port number (0 to 65535)"
        ),
        (
            "same UDP ports", { $0.udp.notificationPort = 7734 },
            "udp.notificationPort: must differ from udp.registrationPort (both 7734)"
        ),
        (
            "HTTP port", { $0.http.port = 65_536 },
            "http.port: 65536 is not a port number (0 to 65535; -1 turns the API off)"
        ),
        ("empty HTTP host", { $0.http.host = "" }, "http.host: must not be empty"),
        ("empty store path", { $0.store.path = "" }, "store.path: must not be empty"),
        ("store URL scheme", { $0.store.url = "mysql://db" }, "store.url: must be a postgres:// URL"),
        (
            "negative minimum free space", { $0.store.minimumFreeBytes = -1 },
            "store.minimumFreeBytes: must be 0 or more bytes (0: no disk-space alarm)"
        ),
        ("empty instance id", { $0.instanceID = "" }, "instanceId: must not be empty"),
        (
            "log level", { $0.logLevel = "loud" },
            "logLevel: unknown level \"loud\" (one of trace, debug, info, notice, warning, error, critical)"
        ),
        (
            "no apps",
            {
                $0.apps = []
                $0.apiKeys = []
            }, "apps: at least one app is needed"
        ),
        (
            "duplicate app names", { $0.apps[1].name = "news" },
            "apps: app \"news\" is listed twice"
        ),
        (
            "app name with a dot", { $0.apps[1].name = "we.ather" },
            "apps: \"we.ather\" is not a valid app name (1 to 64 of a-z, 0-9, '_', '-', starting with a letter or digit)"
        ),
        (
            "bad topic", { $0.apps[0].topic = "com example" },
            "app.news.topic: topic must be a bundle id (letters, digits, '-', '.', '_')"
        ),
        (
            "bad APNs host", { $0.apps[0].apnsHost = "host:port" },
            "app.news.apnsHost: expected HOST:PORT, got \"host:port\""
        ),
        (
            "no credentials", { $0.apps[0].authentication = nil },
            "app.news.certificate.file: no credentials: give certificate.file (and certificate.key), certificate.p12, or token.keyFile with token.keyId and token.teamId"
        ),
        (
            "empty key id", { $0.apps[1].authentication = .token(keyFile: "w.p8", keyID: "", teamID: "TEAM123456") },
            "app.weather.token.keyId: must be a key id such as ABC123DEFG"
        ),
        (
            "team id with a space",
            { $0.apps[1].authentication = .token(keyFile: "w.p8", keyID: "KEY1234567", teamID: "TEAM 1") },
            "app.weather.token.teamId: must be a team id such as DEF123GHIJ"
        ),
        (
            "token without topic", { $0.apps[1].topic = nil },
            "app.weather.topic: required with token authentication (a token names no bundle id)"
        ),
        (
            "max connections", { $0.apps[0].pool.maximumConnections = 0 },
            "app.news.pool.maxConnections: must be at least 1"
        ),
        ("max streams", { $0.apps[0].pool.maximumStreams = 0 }, "app.news.pool.maxStreams: must be at least 1"),
        ("rate", { $0.apps[0].pool.rate = -1 }, "app.news.pool.rate: must be 0 (no limit) or notifications per second"),
        (
            "ping", { $0.apps[0].pool.pingMinutes = -1 },
            "app.news.pool.pingMinutes: must be 0 (off) or a number of minutes"
        ),
        ("idle", { $0.apps[0].pool.idleHours = -1 }, "app.news.pool.idleHours: must be 0 (off) or a number of hours"),
        (
            "legacy fields on HTTP/2", { $0.apps[0].legacy.host = "gw.example:2195" },
            "app.news.transport: legacy.* is set but transport is http2; set transport: legacy or remove legacy.*"
        ),
        (
            "legacy with a token", { $0.apps[1].transport = .legacy },
            "app.weather.transport: the legacy binary interface needs certificate authentication, not a token"
        ),
        (
            "legacy host",
            {
                $0.apps[0].transport = .legacy
                $0.apps[0].legacy.feedbackHost = "feedback:x"
            },
            "app.news.legacy.feedbackHost: expected HOST:PORT, got \"feedback:x\""
        ),
        (
            "legacy feedback interval",
            {
                $0.apps[0].transport = .legacy
                $0.apps[0].legacy.feedbackIntervalSeconds = -5
            },
            "app.news.legacy.feedbackInterval: must be 0 (off) or a number of seconds"
        ),
        (
            "one key id, two teams",
            {
                var other = GatewayConfiguration.App(
                    name: "maps",
                    authentication: .token(keyFile: "m.p8", keyID: "KEY1234567", teamID: "OTHERTEAM1")
                )
                other.topic = "com.example.maps"
                $0.apps.append(other)
            },
            "app.maps.token.teamId: key id KEY1234567 is used by app weather with team TEAM123456; one key belongs to one team"
        ),
        (
            "API key hash", { $0.apiKeys[0].source = .hash("sha256:abc") },
            "apiKey.ops.hash: must be \"sha256:\" and 64 hex digits (the SHA-256 of the key)"
        ),
        (
            "API key hash without prefix", { $0.apiKeys[0].source = .hash(String(repeating: "0f", count: 32)) },
            "apiKey.ops.hash: must be \"sha256:\" and 64 hex digits (the SHA-256 of the key)"
        ),
        (
            "API key for an unknown app", { $0.apiKeys[0].app = "maps" },
            "apiKey.ops.app: no app named \"maps\" is configured"
        ),
        (
            "duplicate API key names", { $0.apiKeys.append($0.apiKeys[0]) },
            "apiKeys: key \"ops\" is listed twice"
        ),
        (
            "non-loopback HTTP without keys",
            {
                $0.apiKeys = []
                $0.http.host = "0.0.0.0"
            },
            "http.host: 0.0.0.0 is not a loopback address; without API keys the HTTP API listens on loopback only (configure apiKeys or --api-key-file)"
        ),
    ]

    @Test("the valid configuration passes")
    func validPasses() throws {
        try Self.valid.validate()
    }

    @Test("each broken value stops start-up with one line naming its key", arguments: cases.indices)
    func failure(_ index: Int) {
        let (what, breakIt, expected) = Self.cases[index]
        var configuration = Self.valid
        breakIt(&configuration)
        #expect(throws: ConfigurationProblem.self, "\(what)") { try configuration.validate() }
        do {
            try configuration.validate()
        } catch {
            #expect(error.description == expected, "\(what)")
            #expect(!error.description.contains("\n"))
        }
    }

    @Test("a problem names the flag that set the key, when a flag did")
    func flagNames() {
        var configuration = Self.valid
        configuration.udp.registrationPort = 99_999
        configuration.flagNames = ["udp.registrationPort": "-g"]
        #expect(throws: ConfigurationProblem(key: "-g", "99999 is not a port number (0 to 65535)")) {
            try configuration.validate()
        }
    }

    @Test("without keys the API stays on loopback whatever listen says; with keys it follows listen")
    func httpHost() throws {
        var configuration = Self.valid
        configuration.apiKeys = []
        configuration.listen = "0.0.0.0"
        try configuration.validate()
        #expect(configuration.http.effectiveHost(listen: configuration.listen, hasKeys: false) == "127.0.0.1")
        #expect(configuration.http.effectiveHost(listen: configuration.listen, hasKeys: true) == "0.0.0.0")
        #expect(configuration.http.effectiveHost(listen: "localhost", hasKeys: true) == "127.0.0.1")
        configuration.http.port = -1
        configuration.http.host = "0.0.0.0"
        try configuration.validate()  // the API is off: nothing listens there
    }

    @Test("loopback means 127.0.0.0/8, ::1 and localhost")
    func loopback() {
        for host in ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"] {
            #expect(GatewayConfiguration.isLoopback(host), "\(host)")
        }
        for host in ["0.0.0.0", "10.0.0.1", "128.0.0.1", "127.0.0", "127.0.0.256", "example.com", "::"] {
            #expect(!GatewayConfiguration.isLoopback(host), "\(host)")
        }
    }

    @Test("sha256: hashes parse in either case and nothing else does")
    func hashes() {
        #expect(
            GatewayConfiguration.parseSHA256("sha256:" + String(repeating: "Ab", count: 32))
                == Array(repeating: 0xAB, count: 32)
        )
        #expect(GatewayConfiguration.parseSHA256("sha256:" + String(repeating: "g0", count: 32)) == nil)
        #expect(GatewayConfiguration.parseSHA256("sha1:" + String(repeating: "00", count: 32)) == nil)
        #expect(GatewayConfiguration.parseSHA256("sha256:" + String(repeating: "00", count: 33)) == nil)
    }
}
