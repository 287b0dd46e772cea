public import APNsClient
import Foundation
public import Logging
public import PushgateCore
public import PushgateDispatch
public import PushgateHTTP
public import PushgatePostgres
import PushgateSQLite
public import PushgateUDP
import ServiceLifecycle
public import UnixSignals

/// The gateway daemon as one value: the SQLite store, the APNs client of the app, the dispatcher and
/// the pushd-compatible UDP ingress, composed in one `ServiceGroup`. `pushgate` (main) and the
/// end-to-end tests both run it.
public struct Gateway: Sendable {
    public struct Configuration: Sendable {
        public var databasePath: String
        public var udp: UDPIngress.Configuration
        public var client: APNsClient.Configuration
        public var topic: Topic
        public var dispatcher: Dispatcher.Configuration
        /// The HTTP API (nil: off). It has no API keys yet, so `Gateway` refuses any address but
        /// loopback for it.
        public var http: HTTPAPI.Configuration? = nil
        /// Stop on these signals (the daemon); tests stop by cancelling instead.
        public var shutdownSignals: [UnixSignal] = [.sigterm, .sigint]
        /// Where the registry and the ledger live: SQLite at `databasePath` unless set to PostgreSQL.
        public var store: StoreLocation {
            get { storeLocation ?? .sqlite(path: databasePath) }
            set {
                storeLocation = newValue
                if case .sqlite(let path) = newValue { databasePath = path }
            }
        }
        private var storeLocation: StoreLocation? = nil

        public init(
            databasePath: String, udp: UDPIngress.Configuration, client: APNsClient.Configuration, topic: Topic,
            dispatcher: Dispatcher.Configuration
        ) {
            self.databasePath = databasePath
            self.udp = udp
            self.client = client
            self.topic = topic
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
    }

    public var configuration: Configuration

    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// Runs until a shutdown signal (or cancellation): intake stops first, the dispatcher drains its
    /// in-flight work and leaves the rest queued, the APNs connections close last.
    public func run(logger: Logger, clock: any WallClock = SystemWallClock(), onReady: @escaping @Sendable (Running) async -> Void = { _ in })
        async throws
    {
        let store: any PushStore
        var postgres: PostgresStore? = nil
        let storeDescription: String
        switch configuration.store {
        case .sqlite(let path):
            do {
                store = try SQLiteStore(path: path, logger: Logger(label: "pushgate.store"))
            } catch {
                throw StartupError(description: "-d: cannot open the database \(path): \(error)")
            }
            storeDescription = path
        case .postgres(let postgresConfiguration):
            do {
                postgres = try PostgresStore(configuration: postgresConfiguration, logger: Logger(label: "pushgate.store"))
            } catch {
                throw StartupError(description: "--store: \(error)")
            }
            store = postgres!
            storeDescription = postgresConfiguration.redactedURL
        }
        defer { try? (store as? SQLiteStore)?.close() }
        let client = try APNsClient(configuration: configuration.client, logger: Logger(label: "pushgate.apns"))
        let dispatcher = Dispatcher(
            store: store, routes: [Registration.defaultApp: DeliveryRoute(client: client, topic: configuration.topic)],
            configuration: configuration.dispatcher, clock: clock, logger: Logger(label: "pushgate.dispatch"))
        // Other instances' new work (NOTIFY) wakes this dispatcher instead of its idle polling.
        postgres?.onWorkAvailable { dispatcher.wakeUp() }
        let udp = UDPIngress(
            configuration: configuration.udp, registry: store, intake: dispatcher, clock: clock, logger: Logger(label: "pushgate.udp"),
            onBound: { bound in
                logger.info(
                    "pushgate ready",
                    metadata: [
                        "udp.registration": "\(bound.registration.map { "\($0)" }.joined(separator: ","))",
                        "udp.notification": "\(bound.notification.map { "\($0)" }.joined(separator: ","))",
                    ])
                await onReady(Running(udp: bound, store: store, intake: dispatcher))
            })
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: client), .init(service: dispatcher), .init(service: udp)]
        // The PostgreSQL store runs its connection pool as a service: started first, stopped last.
        if let postgres { services.insert(.init(service: postgres), at: 0) }
        if let http = configuration.http {
            guard Self.isLoopback(http.host) else {
                throw StartupError(
                    description: "HTTP API: \(http.host) is not a loopback address; without API keys the API listens on loopback only")
            }
            let api: HTTPAPI
            do {
                api = try HTTPAPI(
                    configuration: http, store: store, intake: dispatcher, clock: clock, logger: Logger(label: "pushgate.http"))
            } catch {
                throw StartupError(description: "HTTP API: \(error.key): \(error.message)")
            }
            // Started after the UDP ingress, so stopped before it.
            services.append(.init(service: api.buildApplication()))
        }
        logger.info(
            "pushgate starting",
            metadata: [
                "apns.endpoint": "\(configuration.client.endpoint)", "push.topic": "\(configuration.topic)",
                "push.database": "\(storeDescription)",
            ])
        let group = ServiceGroup(
            configuration: .init(
                services: services,
                gracefulShutdownSignals: configuration.shutdownSignals, logger: logger))
        do {
            try await group.run()
        } catch let error as StoreError where postgres != nil {
            throw StartupError(description: "--store \(storeDescription): \(error.message)")
        }
        logger.info("pushgate stopped")
    }

    /// 127.0.0.0/8, ::1 and `localhost`.
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" || host == "[::1]" { return true }
        let parts = host.split(separator: ".")
        return parts.count == 4 && parts.first == "127" && parts.allSatisfy { UInt8($0) != nil }
    }
}
