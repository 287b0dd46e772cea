public import Logging
public import NIOCore
import NIOPosix
import NIOSSL
public import PushTransport
public import PushgateCore
public import ServiceLifecycle

/// A client for the APNs HTTP/2 provider API: one pool of connections for one set of credentials and
/// one endpoint (production, sandbox, or a simulator/proxy).
///
/// Two ways to send:
/// - `send(_:to:)` awaits one outcome (the `pushgate send` path);
/// - `submit(_:)` queues many requests whose outcomes go to an `APNsOutcomeReceiver` (the
///   dispatcher's path: no task or continuation per notification).
///
/// Lifecycle: `run()` (a `Service`) keeps it alive until graceful shutdown, then lets open streams
/// finish; or use `withClient(configuration:) { client in ... }`.
public final class APNsClient: Sendable {
    public let configuration: Configuration
    private let pool: ConnectionPool<APNsHTTP2Plugin>
    private let ownedGroup: MultiThreadedEventLoopGroup?
    private let logger: Logger

    /// - Parameter metrics: where the client's metrics go (`APNsClientMetrics`, made with the gateway's
    ///   `MetricsFactory`); nothing is recorded by default.
    public init(
        configuration: Configuration,
        eventLoopGroup: (any EventLoopGroup)? = nil,
        logger: Logger? = nil,
        metrics: APNsClientMetrics = .disabled
    ) throws {
        var logger = logger ?? Logger(label: "pushgate.apns")
        logger[metadataKey: "apns.endpoint"] = "\(configuration.endpoint)"
        self.logger = logger
        self.configuration = configuration
        let tlsContext = try configuration.makeTLSContext()
        let group: any EventLoopGroup
        if let eventLoopGroup {
            group = eventLoopGroup
            ownedGroup = nil
        } else {
            let owned = MultiThreadedEventLoopGroup(numberOfThreads: configuration.eventLoopThreads)
            group = owned
            ownedGroup = owned
        }
        let tokenSource: (any APNsProviderTokenSource)?
        switch configuration.authentication {
        case .certificate: tokenSource = nil
        case .token(let source): tokenSource = source
        }
        let plugin = APNsHTTP2Plugin(
            connection: .init(
                pingInterval: configuration.pingInterval,
                pingTimeout: configuration.pingTimeout,
                idleTimeout: configuration.idleTimeout,
                // A rate-limited connection counts as full at `rate` streams, so that sustained load
                // opens more connections (the C pushd's `-r` behaviour) instead of queueing.
                maximumStreams: [
                    configuration.maximumStreamsPerConnection, configuration.maximumNotificationsPerSecondPerConnection,
                ]
                .compactMap { $0 }.min()
            ),
            authority: configuration.endpoint.host,
            tickInterval: configuration.tickInterval,
            requestsPerSecondPerConnection: configuration.maximumNotificationsPerSecondPerConnection,
            tokenSource: tokenSource,
            metrics: metrics,
            logger: logger
        )
        self.pool = ConnectionPool(
            configuration: .init(
                endpoint: configuration.endpoint,
                tlsContext: tlsContext,
                pool: .init(
                    maximumConnections: configuration.maximumConnections,
                    reconnectBaseDelay: configuration.reconnectBaseDelay,
                    reconnectMaximumDelay: configuration.reconnectMaximumDelay,
                    maximumQueued: configuration.maximumQueuedRequests
                ),
                connectTimeout: configuration.connectTimeout,
                requestTimeout: configuration.requestTimeout,
                maximumResends: configuration.maximumUnprocessedAttempts,
                tickInterval: configuration.tickInterval,
                assumedStreamsPerConnection: plugin.connection.maximumStreams.map { min($0, 1000) } ?? 1000
            ),
            plugin: plugin,
            group: group,
            logger: logger
        )
        pool.start()
    }

    /// Runs `body` with a client and shuts it down afterwards, whatever happens.
    public static func withClient<Result: Sendable>(
        configuration: Configuration,
        eventLoopGroup: (any EventLoopGroup)? = nil,
        logger: Logger? = nil,
        _ body: (APNsClient) async throws -> Result
    ) async throws -> Result {
        let client = try APNsClient(configuration: configuration, eventLoopGroup: eventLoopGroup, logger: logger)
        do {
            let result = try await body(client)
            await client.shutdown()
            return result
        } catch {
            await client.shutdown()
            throw error
        }
    }

    /// Queues requests; each outcome goes to its request's receiver exactly once. Never blocks.
    /// Beyond `maximumQueuedRequests` waiting, the excess is answered at once with `.failed(.queueFull)`
    /// (retryable). Returns ids usable with `cancel(_:)`, one per request.
    @discardableResult
    public func submit(_ requests: [APNsRequest]) -> [UInt64] {
        pool.submit(requests)
    }

    /// Abandons a request: dequeued if still queued, its stream reset if in flight. Its receiver gets
    /// a `cancelled` outcome (unless its answer won the race).
    public func cancel(_ id: UInt64) {
        pool.cancel(poolRequestID: id)
    }

    /// Takes back the requests among `ids` that are still queued, i.e. not yet written to any
    /// connection, so APNs has not seen them. Each completes with a `cancelled` outcome. Requests
    /// already on the wire are left to finish. For a graceful stop that leaves unsent work to the ledger.
    @discardableResult
    public func withdraw(_ ids: some Sequence<UInt64>) -> Int {
        pool.withdraw(poolRequestIDs: Set(ids))
    }

    /// Sends one notification to one device and waits for the outcome. Cancelling the task abandons
    /// the request and frees its stream.
    public func send(
        _ notification: PreparedNotification,
        to deviceToken: DeviceToken,
        apnsID: APNsID? = nil,
        deadline: NIODeadline? = nil
    ) async -> APNsOutcome {
        let receiver = SingleOutcomeReceiver()
        return await pool.submitAndWait(
            APNsRequest(
                notification: notification,
                deviceToken: deviceToken,
                apnsID: apnsID,
                receiver: receiver,
                deadline: deadline
            ),
            resuming: receiver.single
        )
    }

    /// False while APNs cannot be reached: the last connection attempt failed and none succeeded since.
    /// True before any attempt (connections open on demand) and while a connection is up. For `/readyz`.
    public var isAPNsReachable: Bool { pool.reachability.isReachable }

    /// Requests worth having unanswered at once: `maximumConnections` times the streams per connection
    /// (the server's SETTINGS_MAX_CONCURRENT_STREAMS, capped by configuration; APNs's 1,000 assumed until
    /// a connection says). One atomic load.
    public var inFlightCapacity: Int { pool.inFlightCapacity }

    /// Queue length, connections (all, usable) and requests in flight: for metrics and tests.
    public var statistics: Statistics {
        let (queued, connections, active, leased) = pool.statistics
        return Statistics(queued: queued, connections: connections, activeConnections: active, inFlight: leased)
    }

    public struct Statistics: Sendable, Hashable {
        public var queued: Int
        public var connections: Int
        public var activeConnections: Int
        public var inFlight: Int
    }

    /// Stops intake, fails queued requests with `shutdown`, lets in-flight streams finish for up to
    /// `configuration.shutdownGracePeriod`, closes the connections.
    public func shutdown() async {
        await pool.shutdown(grace: configuration.shutdownGracePeriod)
        try? await ownedGroup?.shutdownGracefully()
    }
}

extension APNsClient: NotificationTransport {}

extension APNsClient: Service {
    /// Keeps the client until graceful shutdown (or cancellation), then shuts it down.
    public func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }
}

/// Hands one request's outcome to the task awaiting it.
private final class SingleOutcomeReceiver: APNsOutcomeReceiver {
    let single = SingleOutcome<APNsOutcome>()

    func receive(_ outcome: APNsOutcome, for request: APNsRequest) {
        single.resume(outcome)
    }
}
