import APNsLegacy
import FCMTransport
public import Foundation
public import PushgateConfig
public import PushgateCore
import PushgateDispatch
import PushgateHTTP
import PushgatePostgres
import PushgateUDP
import WebPushTransport

extension Gateway.Configuration {
    /// The one composition: the gateway a configuration describes, every file it names read and checked.
    /// `pushgate` builds its gateway here and so do the end-to-end tests; they differ only in the values
    /// they pass (tests: port 0, temporary files, simulator endpoints), never in the steps.
    ///
    /// - Parameters:
    ///   - environment: where `.p12` passphrases and `PUSHGATE_STORE_PASSWORD` are looked up.
    ///   - clock: checks certificates' validity and runs the provider tokens.
    public init(
        _ configuration: GatewayConfiguration,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        clock: any WallClock = SystemWallClock()
    ) throws(ConfigurationProblem) {
        try self.init(configuration.loadCredentials(environment: environment, clock: clock))
    }

    /// The gateway a loaded configuration describes (the second half of ``init(_:environment:clock:)``).
    /// `transport: legacy` apps get a legacy sender (and a feedback poller unless its interval is 0);
    /// `store.url` selects PostgreSQL, with its own chunk size and lease unless `store` sets them.
    init(_ loaded: LoadedConfiguration) throws(ConfigurationProblem) {
        let configuration = loaded.configuration
        var udp = UDPIngress.Configuration(
            host: configuration.listen,
            registrationPort: configuration.udp.registrationPort,
            notificationPort: configuration.udp.notificationPort
        )
        udp.receiveBufferBytes = configuration.udp.receiveBufferBytes
        udp.allowedSenders = configuration.udp.effectiveAllow(listen: configuration.listen)
        self.init(
            databasePath: configuration.store.path,
            udp: udp,
            apps: loaded.apps.map {
                Gateway.App(
                    name: $0.name,
                    topic: $0.topic,
                    client: $0.client,
                    legacy: Self.legacyOptions(of: $0),
                    fcm: $0.fcm.map(FCMClient.Configuration.init),
                    webPush: $0.webPush.map(WebPushClient.Configuration.init)
                )
            },
            dispatcher: .init(instanceID: InstanceID(configuration.instanceID ?? Self.sqliteInstanceID.value))
        )
        instanceIDIsDefault = configuration.instanceID == nil
        source = configuration
        shutdownTimeout = .seconds(configuration.shutdownTimeoutSeconds)
        if configuration.http.port >= 0 {
            var http = HTTPAPI.Configuration(
                host: configuration.http.effectiveHost(listen: configuration.listen, hasKeys: !loaded.apiKeys.isEmpty),
                port: configuration.http.port,
                apps: loaded.apps.map(\.name)
            )
            http.apiKeys = loaded.apiKeys.map { APIKey(sha256: $0.sha256, app: $0.app) }
            http.tls = loaded.httpTLS
            self.http = http
        }
        if let url = configuration.store.url {
            var postgres: PostgresStore.Configuration
            do {
                postgres = try PostgresStore.Configuration(url: url)
            } catch {
                let key = configuration.flagNames["store.url"] ?? "store.url"
                throw ConfigurationProblem(key: key, (error as? StoreError)?.message ?? "\(error)")
            }
            if let password = loaded.storePassword { postgres.password = password }
            use(.postgres(postgres))
        }
        if let minimum = configuration.store.minimumFreeBytes { sqlite.minimumFreeBytes = minimum }
        retention =
            configuration.store.retentionSeconds > 0
            ? LedgerRetention.Configuration(retention: .seconds(configuration.store.retentionSeconds)) : nil
        if let chunkSize = configuration.store.chunkSize { dispatcher.chunkSize = chunkSize }
        if let lease = configuration.store.lease { dispatcher.leaseDuration = lease }
        dispatcher.holdsToInFlightWindow = configuration.dispatchInFlightWindow
        let guardKeys = configuration.misconfiguration
        dispatcher.misconfiguration =
            guardKeys.enabled
            ? MisconfigurationBreaker.Configuration(
                window: .seconds(guardKeys.windowSeconds),
                minimumAnswers: guardKeys.minimumAnswers,
                share: guardKeys.share,
                probeAfter: .seconds(guardKeys.probeAfterSeconds),
                probeLimit: .seconds(guardKeys.probeLimitSeconds),
                probeAnswers: guardKeys.probeAnswers
            ) : nil
    }

    /// The default instance id with SQLite: one file serves one process (a lock on the file refuses a
    /// second), so the id can stay the same across restarts and a restart frees its own leases at once.
    static let sqliteInstanceID = InstanceID("local")

    /// Sets where the store lives; PostgreSQL brings its own chunk size and lease defaults (set
    /// `dispatcher.chunkSize` / `leaseDuration` after this to override them), and, unless an instance id
    /// was chosen, an id unique to this process (several processes share the database).
    public mutating func use(_ location: Gateway.StoreLocation) {
        store = location
        if case .postgres = location {
            dispatcher.chunkSize = PostgresStore.defaultChunkSize
            dispatcher.leaseDuration = PostgresStore.defaultLeaseDuration
            if instanceIDIsDefault { dispatcher.instanceID = .unique() }
        }
    }

    /// The legacy sender and feedback poller of a `transport: legacy` app (validation made sure it
    /// authenticates with a certificate); nil for HTTP/2 apps.
    static func legacyOptions(of app: LoadedApp) -> LegacyTransportOptions? {
        guard app.transport == .legacy, case .certificate(let certificate) = app.client.authentication else {
            return nil
        }
        var sender = LegacySender.Configuration(
            gateway: app.legacyGateway,
            certificate: certificate,
            trustRoots: app.client.trustRoots
        )
        sender.maximumConnections = app.client.maximumConnections
        let feedback = app.legacyFeedbackInterval.map { interval in
            var feedback = FeedbackPoller.Configuration(
                endpoint: app.legacyFeedback,
                app: app.name,
                certificate: certificate,
                trustRoots: app.client.trustRoots
            )
            feedback.interval = interval
            return feedback
        }
        return LegacyTransportOptions(sender: sender, feedback: feedback)
    }
}
