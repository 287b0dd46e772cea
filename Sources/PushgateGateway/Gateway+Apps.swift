import APNsLegacy
import FCMTransport
import Foundation
public import PushgateConfig
import PushgateCore
import PushgateDispatch
import PushgateHTTP
import PushgatePostgres
import PushgateUDP

/// The registry as the UDP ingress sees it with a single app: pushd's datagrams, which name no app
/// (``Registration/defaultApp``), mean that app.
struct SingleAppRegistry: DeviceRegistry {
    let base: any DeviceRegistry
    let app: String

    private func resolve(_ name: String) -> String { name == Registration.defaultApp ? app : name }
    private func resolve(_ registration: Registration) -> Registration {
        var registration = registration
        registration.app = resolve(registration.app)
        return registration
    }

    func register(_ registration: Registration) async throws -> RegistrationResult {
        try await base.register(resolve(registration))
    }
    func register(batch: [Registration]) async throws -> [RegistrationResult] {
        try await base.register(batch: batch.map(resolve))
    }
    func unassign(app: String, token: DeviceToken, group: String) async throws -> Bool {
        try await base.unassign(app: resolve(app), token: token, group: group)
    }
    func removeDevice(app: String, token: DeviceToken) async throws -> Bool {
        try await base.removeDevice(app: resolve(app), token: token)
    }
    func device(app: String, token: DeviceToken) async throws -> DeviceRecord? {
        try await base.device(app: resolve(app), token: token)
    }
    func devices(app: String, group: String, after: GroupCursor?, limit: Int) async throws -> GroupPage {
        try await base.devices(app: resolve(app), group: group, after: after, limit: limit)
    }
    func invalidate(app: String, _ invalidation: DeviceInvalidation, at: Date) async throws -> InvalidationResult {
        try await base.invalidate(app: resolve(app), invalidation, at: at)
    }
}

/// The intake as the UDP ingress sees it with a single app (see ``SingleAppRegistry``).
struct SingleAppIntake: NotificationIntake {
    let base: any NotificationIntake
    let app: String

    func submit(_ request: NotificationRequest) async throws -> EnqueueResult {
        var request = request
        if request.app == Registration.defaultApp { request.app = app }
        return try await base.submit(request)
    }
}

extension Gateway.Configuration {
    /// The gateway a loaded configuration describes: `pushgate` and the tests build it the same way.
    /// `transport: legacy` apps get a legacy sender (and a feedback poller unless its interval is 0).
    public init(_ loaded: LoadedConfiguration) {
        let configuration = loaded.configuration
        var udp = UDPIngress.Configuration(
            host: configuration.listen,
            registrationPort: configuration.udp.registrationPort,
            notificationPort: configuration.udp.notificationPort
        )
        // The kernel charges ~830 bytes per small datagram: 64 MiB (128 MiB granted, forced when root)
        // holds a 100,000-registration burst even while a debug build writes slowly.
        udp.receiveBufferBytes = 64 << 20
        self.init(
            databasePath: configuration.store.path,
            udp: udp,
            apps: loaded.apps.map {
                Gateway.App(
                    name: $0.name,
                    topic: $0.topic,
                    client: $0.client,
                    legacy: Self.legacyOptions(of: $0),
                    fcm: $0.fcm.map(FCMClient.Configuration.init)
                )
            },
            dispatcher: .init(instanceID: InstanceID(configuration.instanceID ?? Self.sqliteInstanceID.value))
        )
        instanceIDIsDefault = configuration.instanceID == nil
        if configuration.http.port >= 0 {
            var http = HTTPAPI.Configuration(
                host: configuration.http.effectiveHost(listen: configuration.listen, hasKeys: !loaded.apiKeys.isEmpty),
                port: configuration.http.port,
                apps: loaded.apps.map(\.name)
            )
            http.apiKeys = loaded.apiKeys.map { APIKey(sha256: $0.sha256, app: $0.app) }
            self.http = http
        }
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
