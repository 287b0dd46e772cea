import Configuration
public import Foundation
import PushgateCore

/// Reads a ``GatewayConfiguration`` with swift-configuration: the daemon's flags, then generic
/// `--key-path VALUE` arguments, then `PUSHGATE_*` environment variables, then the YAML file
/// (`--config FILE` or `PUSHGATE_CONFIG`), then the defaults. The first that has a key wins.
///
/// swift-configuration flattens YAML into scalar keys and has no way to list a mapping's children, so
/// apps (and API keys) are named in a list and described under a mapping of their own:
/// `apps: [news, weather]` with `app.news.topic`, `app.weather.token.keyFile`, ...
public struct ConfigurationLoader: Sendable {
    /// A value given with one of the daemon's own flags, with the flag's spelling for error messages.
    public struct FlagValue: Sendable, Hashable {
        public var value: String
        public var flag: String
        public init(_ value: String, flag: String) {
            self.value = value
            self.flag = flag
        }
    }

    /// What the command line says.
    public struct CommandLine: Sendable {
        /// `--config FILE`.
        public var configFile: String?
        /// The daemon's own flags, by key (`listen`, `udp.registrationPort`, `store.path`...).
        public var values: [String: FlagValue] = [:]
        /// The single-app flags (`-c`, `-k`, `-s`, `--topic`...), by key below `app.NAME.`
        /// (`certificate.file`, `environment`...). They need exactly one app.
        public var appValues: [String: FlagValue] = [:]
        /// Any key as `--key-path VALUE` (`--app-news-pool-max-streams 50`), checked against the known keys.
        public var arguments: [String] = []

        public init(configFile: String? = nil) {
            self.configFile = configFile
        }
    }

    /// Prefix of the environment variables: `PUSHGATE_LISTEN`, `PUSHGATE_APP_NEWS_TOPIC`.
    public static let environmentPrefix = "pushgate"
    /// The environment variable naming the file when `--config` does not.
    public static let configFileVariable = "PUSHGATE_CONFIG"
    /// The app the C pushd's flags configure when no `apps` are listed anywhere.
    public static let singleAppName = Registration.defaultApp

    public var commandLine: CommandLine
    public var environment: [String: String]

    public init(
        commandLine: CommandLine = CommandLine(),
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) {
        self.commandLine = commandLine
        self.environment = environment
    }

    /// Reads and checks (without opening any file it names) the whole configuration.
    public func load() async throws(ConfigurationProblem) -> GatewayConfiguration {
        let file = try await fileProvider()
        let arguments = CommandLineArgumentsProvider(arguments: ["pushgate"] + commandLine.arguments)
        let environmentProvider = EnvironmentVariablesProvider(environmentVariables: environment)
            .prefixKeys(with: ConfigKey(Self.environmentPrefix))
        var lower: [any ConfigProvider] = [arguments, environmentProvider]
        if let file { lower.append(file) }

        // The app names decide which keys exist, so they are read first.
        let names = Values(reader: ConfigReader(providers: lower), flagNames: [:])
        let appNames = try names.names("apps") ?? [Self.singleAppName]
        let keyNames = try names.names("apiKeys") ?? []

        var flags: [AbsoluteConfigKey: ConfigValue] = [:]
        var flagNames: [String: String] = [:]
        for (key, value) in commandLine.values {
            flags[AbsoluteConfigKey(ConfigKey(key))] = ConfigValue(.string(value.value), isSecret: false)
            flagNames[key] = value.flag
        }
        if let first = commandLine.appValues.min(by: { $0.key < $1.key })?.value {
            guard appNames.count == 1 else {
                throw ConfigurationProblem(
                    key: first.flag,
                    "the command line's app flags configure a single app, but \(appNames.count) apps are configured (\(appNames.joined(separator: ", "))); use app.NAME.* keys"
                )
            }
            for (key, value) in commandLine.appValues {
                let full = "app.\(appNames[0]).\(key)"
                flags[AbsoluteConfigKey(ConfigKey(full))] = ConfigValue(.string(value.value), isSecret: false)
                flagNames[full] = value.flag
            }
        }
        try Self.checkArguments(commandLine.arguments, apps: appNames, keys: keyNames)

        let values = Values(
            reader: ConfigReader(
                providers: [InMemoryProvider(name: "flags", values: flags) as any ConfigProvider] + lower
            ),
            flagNames: flagNames
        )
        var configuration = try Self.read(values, appNames: appNames, keyNames: keyNames)
        configuration.flagNames = flagNames
        try configuration.validate()
        return configuration
    }

    private func fileProvider() async throws(ConfigurationProblem) -> FileProvider<YAMLSnapshot>? {
        guard let path = commandLine.configFile ?? environment[Self.configFileVariable] else { return nil }
        let key = commandLine.configFile != nil ? "--config" : Self.configFileVariable
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw ConfigurationProblem(key: key, "cannot read \(path)")
        }
        do {
            return try await FileProvider<YAMLSnapshot>(filePath: .init(path))
        } catch {
            throw ConfigurationProblem(key: key, "\(path) is not a usable YAML configuration: \(error)")
        }
    }

    // MARK: Reading

    static func read(
        _ values: Values,
        appNames: [String],
        keyNames: [String]
    ) throws(ConfigurationProblem) -> GatewayConfiguration {
        var configuration = GatewayConfiguration()
        let defaults = GatewayConfiguration()
        configuration.listen = values.string("listen") ?? defaults.listen
        configuration.udp.registrationPort = try values.int("udp.registrationPort") ?? defaults.udp.registrationPort
        configuration.udp.notificationPort = try values.int("udp.notificationPort") ?? defaults.udp.notificationPort
        configuration.http.port = try values.int("http.port") ?? defaults.http.port
        configuration.http.host = values.string("http.host")
        configuration.http.tls = try readHTTPTLS(values)
        if let ranges = try values.names("udp.allow") {
            var allow: [CIDRRange] = []
            for text in ranges {
                do { allow.append(try CIDRRange(parsing: text)) } catch {
                    throw values.problem("udp.allow", error.description)
                }
            }
            configuration.udp.allow = allow
        }
        configuration.store.path = values.string("store.path") ?? defaults.store.path
        configuration.store.url = values.string("store.url")
        configuration.store.minimumFreeBytes = try values.int("store.minimumFreeBytes").map(Int64.init)
        configuration.store.retentionSeconds =
            try values.durationSeconds("store.retention", offMeansZero: true) ?? defaults.store.retentionSeconds
        configuration.instanceID = values.string("instanceId")
        configuration.logLevel = values.string("logLevel") ?? defaults.logLevel
        configuration.logFormat = values.string("logFormat") ?? defaults.logFormat
        configuration.shutdownTimeoutSeconds = try values.int("shutdown.timeout") ?? defaults.shutdownTimeoutSeconds
        let guardDefaults = defaults.misconfiguration
        configuration.misconfiguration.enabled = try values.bool("misconfiguration.enabled") ?? guardDefaults.enabled
        configuration.misconfiguration.windowSeconds =
            try values.int("misconfiguration.window") ?? guardDefaults.windowSeconds
        configuration.misconfiguration.minimumAnswers =
            try values.int("misconfiguration.minimumAnswers") ?? guardDefaults.minimumAnswers
        configuration.misconfiguration.share = try values.double("misconfiguration.share") ?? guardDefaults.share
        configuration.misconfiguration.probeAfterSeconds =
            try values.int("misconfiguration.probeAfter") ?? guardDefaults.probeAfterSeconds
        configuration.misconfiguration.probeLimitSeconds =
            try values.int("misconfiguration.probeLimit") ?? guardDefaults.probeLimitSeconds
        configuration.misconfiguration.probeAnswers =
            try values.int("misconfiguration.probeAnswers") ?? guardDefaults.probeAnswers
        configuration.dispatchInFlightWindow =
            try values.bool("dispatch.inFlightWindow") ?? defaults.dispatchInFlightWindow

        for name in keyNames {
            let prefix = "apiKey.\(name)"
            let hash = values.string("\(prefix).hash")
            let file = values.string("\(prefix).file")
            let source: GatewayConfiguration.APIKeyEntry.Source
            switch (hash, file) {
            case (let hash?, nil): source = .hash(hash)
            case (nil, let file?): source = .file(file)
            case (.some, .some):
                throw values.problem("\(prefix).file", "give \(prefix).hash or \(prefix).file, not both")
            case (nil, nil):
                throw values.problem("\(prefix).hash", "missing: give \(prefix).hash (sha256:HEX) or \(prefix).file")
            }
            configuration.apiKeys.append(.init(name: name, source: source, app: values.string("\(prefix).app")))
        }

        for name in appNames {
            configuration.apps.append(try readApp(name, values, single: appNames.count == 1))
        }
        return configuration
    }

    static func readApp(
        _ name: String,
        _ values: Values,
        single: Bool
    ) throws(ConfigurationProblem) -> GatewayConfiguration.App {
        let prefix = "app.\(name)"
        var app = GatewayConfiguration.App(name: name)
        app.topic = values.string("\(prefix).topic")
        if let environment = values.string("\(prefix).environment") {
            guard let parsed = APNsEnvironment(rawValue: environment) else {
                throw values.problem("\(prefix).environment", "must be production or sandbox (got \"\(environment)\")")
            }
            app.environment = parsed
        }
        app.alternativePort = try values.bool("\(prefix).alternativePort") ?? false
        app.apnsHost = values.string("\(prefix).apnsHost")
        app.caFile = values.string("\(prefix).ca")

        let certificate = values.string("\(prefix).certificate.file")
        let key = values.string("\(prefix).certificate.key")
        let p12 = values.string("\(prefix).certificate.p12")
        let passphraseVariable = values.string("\(prefix).certificate.passphraseEnv")
        let keyFile = values.string("\(prefix).token.keyFile")
        let keyID = values.string("\(prefix).token.keyId")
        let teamID = values.string("\(prefix).token.teamId")
        let hasToken = keyFile != nil || keyID != nil || teamID != nil
        if hasToken {
            if let conflicting = certificate.map({ _ in "certificate.file" }) ?? p12.map({ _ in "certificate.p12" }) {
                throw values.problem("\(prefix).\(conflicting)", "give a certificate or a token (token.*), not both")
            }
            guard let keyFile else {
                throw values.problem("\(prefix).token.keyFile", "missing: token authentication needs the .p8 key file")
            }
            guard let keyID else {
                throw values.problem("\(prefix).token.keyId", "missing: token authentication needs the key id")
            }
            guard let teamID else {
                throw values.problem("\(prefix).token.teamId", "missing: token authentication needs the team id")
            }
            app.authentication = .token(keyFile: keyFile, keyID: keyID, teamID: teamID)
        } else if let p12 {
            if certificate != nil {
                throw values.problem("\(prefix).certificate.p12", "give certificate.file or certificate.p12, not both")
            }
            if key != nil {
                throw values.problem("\(prefix).certificate.key", "a .p12 bundle holds its key; drop certificate.key")
            }
            app.authentication = .pkcs12(file: p12, passphraseEnvironment: passphraseVariable)
        } else if let certificate {
            if certificate.hasSuffix(".p12") || certificate.hasSuffix(".pfx") {
                // pushd's -c took .p12 files too; the passphrase comes from the environment.
                app.authentication = .pkcs12(
                    file: certificate,
                    passphraseEnvironment: passphraseVariable ?? "PUSHGATE_P12_PASSPHRASE"
                )
            } else if key == nil, single, values.flagNames["\(prefix).certificate.file"] != nil {
                // pushd's -c without -k still read the key from pushd.key.
                app.authentication = .certificate(file: certificate, key: "pushd.key")
            } else {
                app.authentication = .certificate(file: certificate, key: key)
            }
        } else if single {
            // The C pushd's defaults, for the one app it knew.
            app.authentication = .certificate(file: "pushd.crt", key: key ?? "pushd.key")
        }

        app.pool.maximumConnections = try values.int("\(prefix).pool.maxConnections") ?? app.pool.maximumConnections
        app.pool.maximumStreams = try values.int("\(prefix).pool.maxStreams")
        app.pool.rate = try values.int("\(prefix).pool.rate") ?? app.pool.rate
        app.pool.pingMinutes = try values.int("\(prefix).pool.pingMinutes") ?? app.pool.pingMinutes
        app.pool.idleHours = try values.int("\(prefix).pool.idleHours") ?? app.pool.idleHours

        if let transport = values.string("\(prefix).transport") {
            guard let parsed = GatewayConfiguration.App.Transport(rawValue: transport) else {
                throw values.problem("\(prefix).transport", "must be http2 or legacy (got \"\(transport)\")")
            }
            app.transport = parsed
        }
        app.legacy.host = values.string("\(prefix).legacy.host")
        app.legacy.feedbackHost = values.string("\(prefix).legacy.feedbackHost")
        app.legacy.feedbackIntervalSeconds =
            try values.int("\(prefix).legacy.feedbackInterval") ?? app.legacy.feedbackIntervalSeconds
        app.fcm = try readFCM(prefix: "\(prefix).fcm", values)
        app.webPush = try readWebPush(prefix: "\(prefix).webpush", values)
        return app
    }

    /// `app.NAME.webpush.*`: nil when none of its keys is given; any of them needs `webpush.vapidKey` and
    /// `webpush.subject`.
    static func readWebPush(
        prefix: String,
        _ values: Values
    ) throws(ConfigurationProblem) -> GatewayConfiguration.App.WebPush? {
        let given = webPushKeys.filter { values.string("\(prefix).\($0)") != nil }
        guard let first = given.first else { return nil }
        guard let keyFile = values.string("\(prefix).vapidKey") else {
            throw values.problem(
                "\(prefix).\(first)",
                "needs \(prefix).vapidKey (a PEM P-256 key file; pushgate webpush generate-vapid-key)"
            )
        }
        guard let subject = values.string("\(prefix).subject") else {
            throw values.problem(
                "\(prefix).\(first)",
                "needs \(prefix).subject (mailto:you@example.com or an https: URL the push services may contact)"
            )
        }
        var webPush = GatewayConfiguration.App.WebPush(vapidKeyFile: keyFile, subject: subject)
        webPush.caFile = values.string("\(prefix).ca")
        webPush.maximumConnectionsPerOrigin =
            try values.int("\(prefix).pool.maxConnectionsPerOrigin") ?? webPush.maximumConnectionsPerOrigin
        webPush.maximumConnections = try values.int("\(prefix).pool.maxConnections") ?? webPush.maximumConnections
        return webPush
    }

    /// The keys below `app.NAME.webpush.`.
    public static let webPushKeys = [
        "vapidKey", "subject", "ca", "pool.maxConnectionsPerOrigin", "pool.maxConnections",
    ]

    /// `app.NAME.fcm.*`: nil when none of its keys is given; any of them needs `fcm.serviceAccount`.
    static func readFCM(
        prefix: String,
        _ values: Values
    ) throws(ConfigurationProblem) -> GatewayConfiguration.App.FCM? {
        let given = fcmKeys.filter { values.string("\(prefix).\($0)") != nil }
        guard let first = given.first else { return nil }
        guard let file = values.string("\(prefix).serviceAccount") else {
            throw values.problem(
                "\(prefix).\(first)",
                "needs \(prefix).serviceAccount (the service-account JSON file; --fcm-service-account)"
            )
        }
        var fcm = GatewayConfiguration.App.FCM(serviceAccountFile: file)
        fcm.host = values.string("\(prefix).host")
        fcm.tokenURI = values.string("\(prefix).tokenUri")
        fcm.caFile = values.string("\(prefix).ca")
        fcm.maximumConnections = try values.int("\(prefix).pool.maxConnections") ?? fcm.maximumConnections
        fcm.maximumStreams = try values.int("\(prefix).pool.maxStreams")
        return fcm
    }

    /// `http.tls.*`: nil when none is given; a client CA alone, or a certificate without its key, is a
    /// problem.
    static func readHTTPTLS(_ values: Values) throws(ConfigurationProblem) -> GatewayConfiguration.HTTP.TLS? {
        let certificate = values.string("http.tls.certificate")
        let key = values.string("http.tls.key")
        let clientCA = values.string("http.tls.clientCA")
        guard certificate != nil || key != nil || clientCA != nil else { return nil }
        guard let certificate else {
            throw values.problem("http.tls.certificate", "missing: TLS on the HTTP API needs the certificate (PEM)")
        }
        guard let key else {
            throw values.problem("http.tls.key", "missing: TLS on the HTTP API needs the certificate's key (PEM)")
        }
        return .init(certificate: certificate, key: key, clientCA: clientCA)
    }

    /// The keys below `app.NAME.fcm.`.
    public static let fcmKeys = ["serviceAccount", "host", "tokenUri", "ca", "pool.maxConnections", "pool.maxStreams"]

    // MARK: Known keys

    /// Every key, for checking generic `--key-path` arguments (a typo must not pass silently).
    public static func knownKeys(apps: [String], apiKeys: [String]) -> Set<String> {
        var keys: Set<String> = [
            "apps", "apiKeys", "listen", "udp.registrationPort", "udp.notificationPort", "udp.allow", "http.port",
            "http.host", "http.tls.certificate", "http.tls.key", "http.tls.clientCA", "store.path", "store.url",
            "store.minimumFreeBytes", "store.retention", "instanceId", "logLevel", "logFormat", "shutdown.timeout",
            "dispatch.inFlightWindow",
        ]
        keys.formUnion(misconfigurationKeys.map { "misconfiguration.\($0)" })
        for app in apps {
            for key in appKeys { keys.insert("app.\(app).\(key)") }
        }
        for name in apiKeys {
            for key in ["hash", "file", "app"] { keys.insert("apiKey.\(name).\(key)") }
        }
        return keys
    }

    /// The keys below `misconfiguration.`.
    public static let misconfigurationKeys = [
        "enabled", "window", "minimumAnswers", "share", "probeAfter", "probeLimit", "probeAnswers",
    ]

    public static let appKeys =
        [
            "topic", "environment", "alternativePort", "apnsHost", "ca", "certificate.file", "certificate.key",
            "certificate.p12", "certificate.passphraseEnv", "token.keyFile", "token.keyId", "token.teamId",
            "pool.maxConnections", "pool.maxStreams", "pool.rate", "pool.pingMinutes", "pool.idleHours", "transport",
            "legacy.host", "legacy.feedbackHost", "legacy.feedbackInterval",
        ] + fcmKeys.map { "fcm.\($0)" } + webPushKeys.map { "webpush.\($0)" }

    /// `--app-news-pool-max-streams` for `app.news.pool.maxStreams` (swift-configuration's spelling: a
    /// dash only where a lower-case letter meets an upper-case one, so `http.tls.clientCA` is
    /// `--http-tls-client-ca`).
    static func flagSpelling(_ key: String) -> String {
        var result = "--"
        for (index, component) in key.split(separator: ".").enumerated() {
            if index > 0 { result += "-" }
            var previous: Character? = nil
            for character in component {
                if character.isUppercase, previous?.isLowercase == true { result += "-" }
                result += character.lowercased()
                previous = character
            }
        }
        return result
    }

    static func checkArguments(_ arguments: [String], apps: [String], keys: [String]) throws(ConfigurationProblem) {
        guard !arguments.isEmpty else { return }
        let known = Set(knownKeys(apps: apps, apiKeys: keys).map(flagSpelling))
        var expectsValue = false
        for argument in arguments {
            if argument.hasPrefix("--") {
                let name = String(argument.split(separator: "=", maxSplits: 1)[0])
                guard known.contains(name) else {
                    throw ConfigurationProblem(key: name, "unknown flag (no configuration key is spelled so)")
                }
                expectsValue = !argument.contains("=")
            } else if expectsValue {
                expectsValue = false
            } else {
                throw ConfigurationProblem(key: argument, "unexpected argument")
            }
        }
    }
}

/// Typed reads over a `ConfigReader` that report a bad value instead of falling back to a default
/// (swift-configuration's non-throwing getters return the default when a value does not convert).
struct Values {
    let reader: ConfigReader
    let flagNames: [String: String]

    func problem(_ key: String, _ message: String) -> ConfigurationProblem {
        ConfigurationProblem(key: flagNames[key] ?? key, message)
    }

    func string(_ key: String) -> String? {
        reader.string(forKey: ConfigKey(key))
    }

    func int(_ key: String) throws(ConfigurationProblem) -> Int? {
        guard let raw = string(key) else { return nil }
        guard let value = Int(raw.trimmingCharacters(in: .whitespaces)) else {
            throw problem(key, "must be a whole number (got \"\(raw.prefix(40))\")")
        }
        return value
    }

    /// A duration in whole seconds: a number of seconds, or a number and a unit (`s`, `m`, `h`, `d`:
    /// `7d`, `36h`); with `offMeansZero`, `off` is 0.
    func durationSeconds(_ key: String, offMeansZero: Bool = false) throws(ConfigurationProblem) -> Int? {
        guard let raw = string(key) else { return nil }
        let text = raw.trimmingCharacters(in: .whitespaces).lowercased()
        if offMeansZero && text == "off" { return 0 }
        let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var digits = Substring(text)
        var unit = 1
        if let last = text.last, let multiplier = units[last] {
            digits = text.dropLast()
            unit = multiplier
        }
        guard let value = Int(digits), value >= 0, value <= Int(Int32.max) else {
            throw problem(
                key,
                "must be a duration: seconds, or a number with s, m, h or d, e.g. 7d"
                    + (offMeansZero ? ", or off" : "") + " (got \"\(raw.prefix(40))\")"
            )
        }
        return value * unit
    }

    func double(_ key: String) throws(ConfigurationProblem) -> Double? {
        guard let raw = string(key) else { return nil }
        guard let value = Double(raw.trimmingCharacters(in: .whitespaces)), value.isFinite else {
            throw problem(key, "must be a number (got \"\(raw.prefix(40))\")")
        }
        return value
    }

    func bool(_ key: String) throws(ConfigurationProblem) -> Bool? {
        guard let raw = string(key) else { return nil }
        switch raw.lowercased() {
        case "true", "yes", "on", "1": return true
        case "false", "no", "off", "0": return false
        default: throw problem(key, "must be true or false (got \"\(raw.prefix(40))\")")
        }
    }

    /// A list of names: a YAML sequence, or comma-separated in a flag or environment variable.
    func names(_ key: String) throws(ConfigurationProblem) -> [String]? {
        let list: [String]
        if let array = reader.stringArray(forKey: ConfigKey(key)) {
            list = array
        } else if let text = string(key) {
            list = text.split(separator: ",").map(String.init)
        } else {
            return nil
        }
        return list.map { $0.trimmingCharacters(in: .whitespaces) }
    }
}
