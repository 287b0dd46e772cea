public import APNsClient
import Foundation
public import Logging
public import PushgateCore
public import PushgateDispatch
public import PushgateHTTP
import PushgateSQLite
import Prometheus
import Synchronization
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
        let store: SQLiteStore
        do {
            store = try SQLiteStore(path: configuration.databasePath, logger: Logger(label: "pushgate.store"))
        } catch {
            throw StartupError(description: "-d: cannot open the database \(configuration.databasePath): \(error)")
        }
        defer { try? store.close() }
        // One registry per gateway (no global bootstrap): what GET /metrics serves.
        let registry = PrometheusCollectorRegistry()
        let metricsFactory = PrometheusMetricsFactory(registry: registry)
        let httpPort = BoundPort()
        let client = try APNsClient(
            configuration: configuration.client, logger: Logger(label: "pushgate.apns"),
            metrics: APNsClientMetrics(factory: metricsFactory, app: Registration.defaultApp))
        let dispatcher = Dispatcher(
            store: store, routes: [Registration.defaultApp: DeliveryRoute(client: client, topic: configuration.topic)],
            configuration: configuration.dispatcher, clock: clock, logger: Logger(label: "pushgate.dispatch"),
            metrics: DispatchMetrics(factory: metricsFactory))
        let udp = UDPIngress(
            configuration: configuration.udp, registry: store, intake: dispatcher, clock: clock,
            observer: UDPIngressMetrics(factory: metricsFactory), logger: Logger(label: "pushgate.udp"),
            onBound: { bound in
                logger.info(
                    "pushgate ready",
                    metadata: [
                        "udp.registration": "\(bound.registration.map { "\($0)" }.joined(separator: ","))",
                        "udp.notification": "\(bound.notification.map { "\($0)" }.joined(separator: ","))",
                    ])
                await onReady(
                    Running(
                        udp: bound, store: store, intake: dispatcher, metricsExposition: { registry.emitToBuffer() },
                        httpPort: { httpPort.value }))
            })
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: client), .init(service: dispatcher), .init(service: udp)]
        if let http = configuration.http {
            guard Self.isLoopback(http.host) else {
                throw StartupError(
                    description: "HTTP API: \(http.host) is not a loopback address; without API keys the API listens on loopback only")
            }
            let api: HTTPAPI
            do {
                api = try HTTPAPI(
                    configuration: http, store: store, intake: dispatcher, clock: clock, logger: Logger(label: "pushgate.http"),
                    monitoring: .init(
                        metricsFactory: metricsFactory, metricsExposition: { registry.emitToBuffer() },
                        apnsReachable: { client.isAPNsReachable }),
                    onBound: { port in httpPort.value = port })
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
                "push.database": "\(configuration.databasePath)",
            ])
        let group = ServiceGroup(
            configuration: .init(
                services: services,
                gracefulShutdownSignals: configuration.shutdownSignals, logger: logger))
        try await group.run()
        logger.info("pushgate stopped")
    }

    /// 127.0.0.0/8, ::1 and `localhost`.
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" || host == "[::1]" { return true }
        let parts = host.split(separator: ".")
        return parts.count == 4 && parts.first == "127" && parts.allSatisfy { UInt8($0) != nil }
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
