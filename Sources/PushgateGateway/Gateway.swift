public import APNsHTTP2
import APNsLegacy
import APNsTransport
import CoreMetrics
public import FCMTransport
import Foundation
public import Logging
import Prometheus
import PushTransport
public import PushgateConfig
public import PushgateCore
public import PushgateDispatch
public import PushgateHTTP
public import PushgatePostgres
public import PushgateSQLite
public import PushgateUDP
import ServiceLifecycle
import Synchronization
public import UnixSignals
public import WebPushTransport

/// The gateway daemon as one value: the SQLite store, one APNs client per app, the dispatcher and
/// the pushd-compatible UDP ingress, composed in one `ServiceGroup`. `pushgate` (main) and the
/// end-to-end tests both build its configuration with ``Configuration/init(_:environment:clock:)`` and run it.
public struct Gateway: Sendable {
    /// One app: a name (the `app` of registrations and requests), its topic, and its own APNs client
    /// configuration. Each app gets its own client, so apps never share a connection; token apps of one
    /// team may share a provider token by sharing one `ProviderTokenManager` in `client.authentication`.
    public struct App: Sendable {
        public var name: String
        public var topic: Topic
        public var client: APNsClient.Configuration
        /// The legacy binary interface instead of HTTP/2 for this app, plus feedback polling (nil:
        /// HTTP/2 with `client`).
        public var legacy: LegacyTransportOptions?
        /// The app's FCM client (nil: no FCM route; its FCM devices fail with a recorded reason).
        public var fcm: FCMClient.Configuration?
        /// The app's Web Push client (nil: no Web Push route; its browsers fail with a recorded reason).
        public var webPush: WebPushClient.Configuration?

        public init(
            name: String,
            topic: Topic,
            client: APNsClient.Configuration,
            legacy: LegacyTransportOptions? = nil,
            fcm: FCMClient.Configuration? = nil,
            webPush: WebPushClient.Configuration? = nil
        ) {
            self.name = name
            self.topic = topic
            self.client = client
            self.legacy = legacy
            self.fcm = fcm
            self.webPush = webPush
        }
    }

    public struct Configuration: Sendable {
        public var databasePath: String
        public var udp: UDPIngress.Configuration
        /// The apps served, in configuration order. With exactly one, UDP datagrams and HTTP routes that
        /// name no app use it.
        public var apps: [App]
        public var dispatcher: Dispatcher.Configuration
        /// The HTTP API (nil: off). Without API keys, `Gateway` refuses any address but loopback for it.
        public var http: HTTPAPI.Configuration? = nil
        /// Stop on these signals (the daemon); tests stop by cancelling instead.
        public var shutdownSignals: [UnixSignal] = [.sigterm, .sigint]
        /// Run the reload hook (``Running/reload``) on these signals: the HTTP API's certificate is read
        /// again. Tests reload by calling it instead.
        public var reloadSignals: [UnixSignal] = [.sighup]
        /// How long a graceful stop may take before what is still running is cancelled (`shutdown.timeout`):
        /// a store that is out must not make SIGTERM wait for SIGKILL. What was accepted is durably stored
        /// by then; registrations read during a store outage and not yet written are counted and logged.
        public var shutdownTimeout: Duration = .seconds(30)
        /// Where the registry and the ledger live: SQLite at `databasePath` unless set to PostgreSQL.
        public var store: StoreLocation {
            get { storeLocation ?? .sqlite(path: databasePath) }
            set {
                storeLocation = newValue
                if case .sqlite(let path) = newValue { databasePath = path }
            }
        }
        private var storeLocation: StoreLocation? = nil
        /// The SQLite store's settings (`store.minimumFreeBytes`, the WAL's limit); unused with PostgreSQL.
        public var sqlite = SQLiteStore.Configuration()
        /// How a reload (SIGHUP) reads the configuration again, to apply new API keys and credentials (see
        /// ``ConfigurationReloader``); nil: a reload re-reads only the HTTP API's certificate.
        public var reloadSource: ReloadSource? = nil
        /// The configuration this one was built from (set by ``init(_:environment:clock:)``): a reload
        /// compares the configuration it reads with it. A reload source without it is ignored.
        public var source: GatewayConfiguration? = nil
        /// Retention of finished requests (`store.retention`; nil: every request is kept).
        public var retention: LedgerRetention.Configuration? = nil
        /// How often a retention pass runs.
        public var retentionInterval: Duration = .seconds(60)
        /// True when nobody chose `dispatcher.instanceID`: ``use(_:)`` then makes it unique to the process
        /// for PostgreSQL.
        public var instanceIDIsDefault = false
        /// How long this process's claim of its instance id outlives its last renewal (PostgreSQL). A
        /// restart with the same explicit id after a crash waits up to this long.
        public var instanceTimeToLive: Duration = .seconds(15)

        public init(
            databasePath: String,
            udp: UDPIngress.Configuration,
            apps: [App],
            dispatcher: Dispatcher.Configuration
        ) {
            self.databasePath = databasePath
            self.udp = udp
            self.apps = apps
            self.dispatcher = dispatcher
        }
    }

    /// The store: one SQLite file for one instance, or one PostgreSQL database that several instances
    /// share (registry and work).
    public enum StoreLocation: Sendable {
        case sqlite(path: String)
        case postgres(PostgresStore.Configuration)
    }

    /// A start-up problem (exit 78): names what is wrong.
    public struct StartupError: Error, CustomStringConvertible {
        public let description: String
    }

    /// What a running gateway exposes to whoever started it (tests, the HTTP API later).
    public struct Running: Sendable {
        public var udp: UDPIngress.BoundAddresses
        public var store: any PushStore
        public var intake: any NotificationIntake
        /// The Prometheus text `GET /metrics` serves (this gateway's own registry).
        public var metricsExposition: @Sendable () -> [UInt8] = { [] }
        /// The HTTP API's bound port, once it listens (nil while it does not, or when it is off).
        public var httpPort: @Sendable () -> Int? = { nil }
        /// What a reload signal (SIGHUP) runs: every registered reloader, once; returns when they are done.
        public var reload: @Sendable () async -> Void = {}
    }

    public var configuration: Configuration

    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// Runs until a shutdown signal (or cancellation): intake stops first, the dispatcher drains its
    /// in-flight work and leaves the rest queued, the APNs connections close last. `reloadHook` may carry
    /// the caller's own reloaders (the command's log file); the gateway adds its own to it.
    public func run(
        logger: Logger,
        clock: any WallClock = SystemWallClock(),
        reloadHook: ReloadHook = ReloadHook(),
        onReady: @escaping @Sendable (Running) async -> Void = { _ in }
    )
        async throws
    {
        try configuration.checkLease()
        let reloadable = configuration.reloadSource != nil && configuration.source != nil
        let store: any PushStore
        var postgres: PostgresStore? = nil
        let storeDescription: String
        var fileLock: DatabaseFileLock? = nil
        defer { withExtendedLifetime(fileLock) {} }
        switch configuration.store {
        case .sqlite(let path):
            fileLock = try DatabaseFileLock(databasePath: path)
            do {
                var sqlite = configuration.sqlite
                // A fixed set of descriptors and threads from the start (the soak judges them flat).
                sqlite.opensEveryReaderAtStart = true
                store = try SQLiteStore(path: path, configuration: sqlite, logger: Logger(label: "pushgate.store"))
            } catch {
                throw StartupError(description: "-d: cannot open the database \(path): \(error)")
            }
            storeDescription = path
        case .postgres(let postgresConfiguration):
            do {
                postgres = try PostgresStore(
                    configuration: postgresConfiguration,
                    logger: Logger(label: "pushgate.store")
                )
            } catch {
                throw StartupError(description: "--store: \(error)")
            }
            store = postgres!
            storeDescription = postgresConfiguration.redactedURL
        }
        defer { try? (store as? SQLiteStore)?.close() }
        guard !configuration.apps.isEmpty else { throw StartupError(description: "apps: at least one app is needed") }
        // One registry per gateway (no global bootstrap): what GET /metrics serves.
        let registry = PrometheusCollectorRegistry()
        let metricsFactory = PrometheusMetricsFactory(registry: registry)
        // Which build serves: constant 1, the version in the label (Prometheus' build_info convention).
        CoreMetrics.Gauge(
            label: "pushgate_build_info",
            dimensions: [("version", BuildInfo.version)],
            factory: metricsFactory
        ).record(1)
        let sqliteStore = store as? SQLiteStore
        let maintenance = sqliteStore.map {
            StoreMaintenance(store: $0, metricsFactory: metricsFactory, logger: Logger(label: "pushgate.store"))
        }
        let httpPort = BoundPort()
        var apnsClients: [APNsClient] = []
        var transports: [any APNsNotificationTransport & Service] = []
        var feedbackPollers: [FeedbackPoller] = []
        var fcmClients: [FCMClient] = []
        var fcmByApp: [(app: String, client: FCMClient)] = []
        var webPushClients: [WebPushClient] = []
        var routes: [String: DeliveryRoute] = [:]
        // Per app, in configuration order: its HTTP/2 APNs client (nil for a legacy app) and FCM client.
        var apnsClientsByApp: [APNsClient?] = []
        var fcmClientsByApp: [FCMClient?] = []
        var webPushClientsByApp: [WebPushClient?] = []
        for app in configuration.apps {
            guard routes[app.name] == nil else {
                throw StartupError(description: "apps: app \"\(app.name)\" is listed twice")
            }
            let transport: any APNsNotificationTransport & Service
            if let legacy = app.legacy {
                var appLogger = Logger(label: "pushgate.legacy")
                appLogger[metadataKey: "push.app"] = "\(app.name)"
                do {
                    transport = try LegacySender(configuration: legacy.sender, logger: appLogger)
                } catch {
                    throw StartupError(description: "app.\(app.name).transport: legacy: \(error)")
                }
                if let feedback = legacy.feedback {
                    feedbackPollers.append(
                        FeedbackPoller(
                            configuration: feedback,
                            registry: store,
                            clock: clock,
                            logger: Logger(label: "pushgate.feedback")
                        )
                    )
                }
            } else {
                var appLogger = Logger(label: "pushgate.apns")
                appLogger[metadataKey: "push.app"] = "\(app.name)"
                let client = try APNsClient(
                    configuration: app.client,
                    logger: appLogger,
                    metrics: APNsClientMetrics(factory: metricsFactory, app: app.name)
                )
                apnsClients.append(client)
                transport = client
            }
            apnsClientsByApp.append(transport as? APNsClient)
            transports.append(transport)
            let fcm = try app.fcm.map { try Self.makeFCMClient($0, app: app.name) }
            if let fcm {
                fcmClients.append(fcm)
                fcmByApp.append((app.name, fcm))
            }
            fcmClientsByApp.append(fcm)
            let webPush = try app.webPush.map {
                try Self.makeWebPushClient(
                    $0,
                    app: app.name,
                    metrics: WebPushClientMetrics(factory: metricsFactory, app: app.name)
                )
            }
            if let webPush { webPushClients.append(webPush) }
            webPushClientsByApp.append(webPush)
            // The app's services, one registration line each, by the platform of the devices they serve.
            var services: [any PushService] = [APNsPushService(transport: transport, topic: app.topic)]
            if let fcm { services.append(FCMPushService(transport: fcm)) }
            if let webPush { services.append(WebPushPushService(transport: webPush, override: { $0.webPush })) }
            routes[app.name] = DeliveryRoute(services: services)
        }
        // Every credential with an expiry: metrics, warnings at 30/7/1 days, expired ones on /readyz. Read
        // from the clients, whose credentials a reload may replace.
        var expirySources: [(credential: CredentialExpiryWatch.Credential, expiry: @Sendable () -> Date?)] = []
        for (app, client) in zip(configuration.apps, apnsClientsByApp) {
            guard let client, case .certificate = app.client.authentication else { continue }
            expirySources.append(
                (
                    .init(app: app.name, kind: "apns_certificate"),
                    {
                        guard case .certificate(let certificate) = client.authentication else { return nil }
                        return certificate.notValidAfter
                    }
                )
            )
        }
        if let tls = configuration.http?.tls {
            expirySources.append((.init(app: "", kind: "http_tls_certificate"), { tls.identity.notValidAfter }))
        }
        let expiryWatch = CredentialExpiryWatch(
            sources: expirySources,
            clock: clock,
            metricsFactory: metricsFactory,
            logger: Logger(label: "pushgate.credentials")
        )
        let dispatcher = Dispatcher(
            store: store,
            routes: routes,
            configuration: configuration.dispatcher,
            clock: clock,
            logger: Logger(label: "pushgate.dispatch"),
            metrics: DispatchMetrics(factory: metricsFactory)
        )
        // "Ready" once every port is bound: the UDP ports, and the HTTP API's when it is on; with PostgreSQL, also
        // once this process holds its instance id. Whoever waits for the daemon (a detached start's parent,
        // systemd) must not hear "ready" before a port that can still fail to bind, or from a process that may
        // yet be refused its id (another live process holds it) and exit 78.
        let ready = ReadinessLatch(
            waitsForHTTP: configuration.http != nil,
            waitsForInstanceClaim: postgres != nil
        ) { bound in
            logger.info(
                "pushgate ready",
                metadata: [
                    "udp.registration": "\(bound.registration.map { "\($0)" }.joined(separator: ","))",
                    "udp.notification": "\(bound.notification.map { "\($0)" }.joined(separator: ","))",
                    "http.port": "\(httpPort.value.map { "\($0)" } ?? "off")",
                ]
            )
            // systemd (Type=notify): ready now that every port is bound.
            SystemdNotifier().notify("READY=1\nMAINPID=\(getpid())")
            await onReady(
                Running(
                    udp: bound,
                    store: store,
                    intake: dispatcher,
                    metricsExposition: { registry.emitToBuffer() },
                    httpPort: { httpPort.value },
                    reload: { await reloadHook.reload(logger: logger) }
                )
            )
        }
        // Other instances' new work (NOTIFY) wakes this dispatcher instead of its idle polling.
        postgres?.onWorkAvailable { dispatcher.wakeUp() }
        // pushd's datagrams name no app; they mean the only one, whatever it is called.
        let single = configuration.apps.count == 1 ? configuration.apps[0].name : nil
        let udpRegistry: any DeviceRegistry = single.map { SingleAppRegistry(base: store, app: $0) } ?? store
        let udpIntake: any NotificationIntake = single.map { SingleAppIntake(base: dispatcher, app: $0) } ?? dispatcher
        let udp = UDPIngress(
            configuration: configuration.udp,
            registry: udpRegistry,
            intake: udpIntake,
            clock: clock,
            observer: UDPIngressMetrics(factory: metricsFactory),
            logger: Logger(label: "pushgate.udp"),
            onBound: { bound in await ready.arrive(udp: bound) }
        )
        // Transports start first and stop last: the dispatcher drains into them.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] =
            transports.map { .init(service: $0) } + fcmClients.map { .init(service: $0) }
            + webPushClients.map { .init(service: $0) }
        if !expiryWatch.isEmpty { services.append(.init(service: expiryWatch)) }
        if let retention = configuration.retention, let pruning = store as? any LedgerPruning {
            services.append(
                .init(
                    service: RetentionService(
                        pruner: LedgerPruner(store: pruning, configuration: retention),
                        interval: configuration.retentionInterval,
                        clock: clock,
                        metricsFactory: metricsFactory,
                        logger: Logger(label: "pushgate.store")
                    )
                )
            )
        }
        let systemd = SystemdNotifier()
        if systemd.isActive { services.append(.init(service: systemd.service())) }
        // What runs under this instance's id: the dispatcher, and the intake that feeds it.
        var underID: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: dispatcher), .init(service: udp),
        ]
        underID += feedbackPollers.map { .init(service: $0) }
        var api: HTTPAPI? = nil
        if var http = configuration.http {
            guard !http.apiKeys.isEmpty || Self.isLoopback(http.host) else {
                throw StartupError(
                    description:
                        "http.host: \(http.host) is not a loopback address; without API keys the API listens on loopback only"
                )
            }
            http.apps = configuration.apps.map(\.name)
            // With a reload source, the API's certificate is reloaded with the rest of the configuration.
            Self.prepareTLS(of: http, reloadHook: reloadable ? nil : reloadHook, logger: logger)
            let apnsClients = apnsClients
            let fcmClients = fcmClients
            let built: HTTPAPI
            let fcmByApp = fcmByApp
            do {
                built = try HTTPAPI(
                    configuration: http,
                    store: store,
                    intake: dispatcher,
                    clock: clock,
                    logger: Logger(label: "pushgate.http"),
                    monitoring: .init(
                        metricsFactory: metricsFactory,
                        metricsExposition: { registry.emitToBuffer() },
                        // Ready when some app can reach APNs (a legacy-only gateway has no HTTP/2 client to ask).
                        apnsReachable: { apnsClients.isEmpty || apnsClients.contains { $0.isAPNsReachable } },
                        // Apps with FCM configured: ready when one of their FCM clients can connect.
                        fcmReachable: { fcmClients.isEmpty || fcmClients.contains { $0.isFCMReachable } },
                        dispatcherReady: { dispatcher.isStoreHealthy },
                        // Not ready while a configuration alarm holds an app's sending (a wrong environment or
                        // project, FCM credentials the token endpoint refuses) or a credential has expired.
                        configurationAlarms: {
                            dispatcher.misconfigurationAlarms.map(\.summary) + expiryWatch.expiredSummaries
                                + Self.fcmCredentialAlarms(fcmByApp)
                        },
                        diskSpaceProblem: { sqliteStore.flatMap(Self.diskSpaceProblem(of:)) }
                    ),
                    onBound: { port in
                        httpPort.value = port
                        await ready.arriveHTTP()
                    }
                )
            } catch {
                throw StartupError(description: "HTTP API: \(error.key): \(error.message)")
            }
            // Started after the UDP ingress, so stopped before it.
            underID.append(.init(service: built.buildApplication()))
            api = built
        }
        if let reloadSource = configuration.reloadSource, let source = configuration.source {
            let reloader = ConfigurationReloader(
                source: reloadSource,
                started: source,
                apps: configuration.apps.indices.map { index in
                    let app = configuration.apps[index]
                    return .init(
                        name: app.name,
                        topic: app.topic,
                        apns: apnsClientsByApp[index],
                        fcm: fcmClientsByApp[index],
                        webPush: webPushClientsByApp[index]
                    )
                },
                api: api,
                clock: clock,
                metricsFactory: metricsFactory
            )
            reloadHook.register("configuration") { logger in await reloader.reload(logger: logger) }
        }
        // After the configuration's reloader: a renewed certificate is seen at once.
        reloadHook.register("credential expiry") { _ in expiryWatch.check() }
        if let postgres {
            // The id is claimed before the dispatcher frees "its own" leases (SQLite's file lock already kept a
            // second process away). Only the dispatcher waits for it: a nested ServiceGroup around the intake
            // stalled the dispatcher after PostgreSQL connections were terminated (PostgresFaultTests).
            let claim = InstanceClaim(
                leases: postgres,
                id: configuration.dispatcher.instanceID,
                timeToLive: configuration.instanceTimeToLive,
                clock: clock,
                logger: logger,
                onClaimed: { await ready.arriveInstanceClaim() },
                work: { try await dispatcher.run() }
            )
            // The PostgreSQL store runs its connection pool as a service: started first, stopped last.
            services = [.init(service: postgres)] + services + [.init(service: claim)] + underID.dropFirst()
        } else {
            services += underID
        }
        // Started first, stopped last: it checkpoints the WAL that everything else writes.
        if let maintenance { services.insert(.init(service: maintenance), at: 0) }
        for app in configuration.apps {
            let fcmEndpoint = app.fcm.map { "\($0.endpoint) project \($0.serviceAccount.projectID)" } ?? "none"
            logger.info(
                "app configured",
                metadata: [
                    "push.app": "\(app.name)", "push.topic": "\(app.topic)",
                    "apns.endpoint": "\(app.legacy.map { "legacy \($0.sender.gateway)" } ?? "\(app.client.endpoint)")",
                    "fcm.endpoint": "\(fcmEndpoint)",
                    // The page's applicationServerKey: public, and what a browser must subscribe with.
                    "webpush.vapid_public_key": "\(app.webPush.map(\.vapidKey.publicKeyBase64URL) ?? "none")",
                ]
            )
        }
        logger.info(
            "pushgate starting",
            metadata: [
                "push.database": "\(storeDescription)", "push.instance": "\(configuration.dispatcher.instanceID)",
            ]
        )
        if !configuration.reloadSignals.isEmpty {
            // Started last, stopped first: a reload never runs while the services stop.
            services.append(.init(service: reloadHook.service(signals: configuration.reloadSignals, logger: logger)))
        }
        var groupConfiguration = ServiceGroupConfiguration(
            services: services,
            gracefulShutdownSignals: configuration.shutdownSignals,
            logger: logger
        )
        groupConfiguration.maximumGracefulShutdownDuration = configuration.shutdownTimeout
        let group = ServiceGroup(configuration: groupConfiguration)
        do {
            try await group.run()
        } catch let error as StoreError where postgres != nil {
            throw StartupError(description: "--store \(storeDescription): \(error.message)")
        }
        logger.info("pushgate stopped")
    }

    /// What `/readyz` says while the SQLite database's volume has less free space than
    /// `store.minimumFreeBytes`; nil while it has enough.
    static func diskSpaceProblem(of store: SQLiteStore) -> String? {
        let use = store.diskUse()
        guard use.isLow else { return nil }
        return "the database's volume has \(use.freeBytes) bytes free, less than store.minimumFreeBytes "
            + "(\(use.minimumFreeBytes)); writes fail once it is full"
    }

    /// 127.0.0.0/8, ::1 and `localhost`.
    static func isLoopback(_ host: String) -> Bool {
        GatewayConfiguration.isLoopback(host)
    }
}

/// Calls its action once, when the UDP ports and (if it waits for them) the HTTP API's port are bound and the
/// instance id is claimed, in whichever order they come.
private final class ReadinessLatch: Sendable {
    private struct State {
        var udp: UDPIngress.BoundAddresses?
        var http: Bool
        var instanceClaim: Bool
        var fired = false
    }
    private let state: Mutex<State>
    private let action: @Sendable (UDPIngress.BoundAddresses) async -> Void

    init(
        waitsForHTTP: Bool,
        waitsForInstanceClaim: Bool,
        action: @escaping @Sendable (UDPIngress.BoundAddresses) async -> Void
    ) {
        state = Mutex(State(udp: nil, http: !waitsForHTTP, instanceClaim: !waitsForInstanceClaim))
        self.action = action
    }

    func arrive(udp: UDPIngress.BoundAddresses) async {
        await fireIfComplete { $0.udp = udp }
    }

    func arriveHTTP() async {
        await fireIfComplete { $0.http = true }
    }

    func arriveInstanceClaim() async {
        await fireIfComplete { $0.instanceClaim = true }
    }

    private func fireIfComplete(_ change: (inout State) -> Void) async {
        let bound: UDPIngress.BoundAddresses? = state.withLock { state in
            change(&state)
            guard !state.fired, state.http, state.instanceClaim, let udp = state.udp else { return nil }
            state.fired = true
            return udp
        }
        if let bound { await action(bound) }
    }
}

/// The HTTP API's port once bound, shared between its `onBound` and `Running.httpPort`.
private final class BoundPort: Sendable {
    private let port = Mutex<Int?>(nil)
    var value: Int? {
        get { port.withLock { $0 } }
        set { port.withLock { $0 = newValue } }
    }
}
