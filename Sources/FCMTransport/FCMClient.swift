import AsyncHTTPClient
public import Logging
public import NIOCore
import NIOPosix
import PushTransport
public import PushgateCore
public import ServiceLifecycle

/// A client for FCM's HTTP v1 `messages:send`: one pool of HTTP/2 connections for one service account
/// and one endpoint (Google, or a simulator).
///
/// Two ways to send, as `APNsClient`:
/// - `send(_:to:)` awaits one outcome (the `pushgate send` path);
/// - `submit(_:)` queues many messages whose outcomes go to an `FCMOutcomeReceiver` (the dispatcher's path).
///
/// Authorization is `Bearer` with the service account's access token: one token per client, fetched
/// on first use (AsyncHTTPClient to `token_uri`), refreshed before it expires, one fetch at a time.
///
/// Lifecycle, as `APNsClient`: `init` opens nothing (connections open on demand); `run()` (a `Service`)
/// keeps it alive until graceful shutdown, then lets open streams finish; or `withClient { ... }`.
public final class FCMClient: FCMNotificationTransport, Sendable {
    public let configuration: Configuration
    private let pool: ConnectionPool<FCMHTTP2Plugin>
    private let tokens: FCMAccessTokenManager
    private let bearer: FCMBearerCache
    private let tokenClient: HTTPClient
    private let ownedGroup: MultiThreadedEventLoopGroup?
    private let logger: Logger

    /// - Parameter clock: the wall clock of access-token expiry and `Retry-After` dates.
    public init(
        configuration: Configuration,
        eventLoopGroup: (any EventLoopGroup)? = nil,
        logger: Logger? = nil,
        clock: any WallClock = SystemWallClock()
    ) throws {
        var logger = logger ?? Logger(label: "pushgate.fcm")
        logger[metadataKey: "fcm.endpoint"] = "\(configuration.endpoint)"
        self.logger = logger
        self.configuration = configuration
        let account = try configuration.effectiveServiceAccount()
        let tlsContext = try configuration.makeTLSContext()
        let tokenTLS = try TransportTLS.makeConfiguration(
            trustRoots: configuration.trustRoots,
            certificate: nil,
            applicationProtocols: []
        )
        let group: any EventLoopGroup
        if let eventLoopGroup {
            group = eventLoopGroup
            ownedGroup = nil
        } else {
            let owned = MultiThreadedEventLoopGroup(numberOfThreads: configuration.eventLoopThreads)
            group = owned
            ownedGroup = owned
        }
        tokenClient = HTTPClient(eventLoopGroup: group, configuration: .init(tlsConfiguration: tokenTLS))
        tokens = FCMAccessTokenManager(
            signer: FCMAssertionSigner(account: account),
            exchanger: FCMTokenExchanger(client: tokenClient, timeout: TimeAmount(configuration.tokenExchangeTimeout)),
            clock: clock
        )
        bearer = FCMBearerCache(manager: tokens, clock: clock)
        let authority = configuration.port == 443 ? configuration.host : "\(configuration.endpoint)"
        let plugin = FCMHTTP2Plugin(
            connection: .init(
                pingInterval: configuration.pingInterval.map(TimeAmount.init),
                pingTimeout: TimeAmount(configuration.pingTimeout),
                idleTimeout: configuration.idleTimeout.map(TimeAmount.init),
                maximumStreams: configuration.maxStreams
            ),
            headers: FCMRequestHeaders(authority: authority, projectID: account.projectID),
            bearer: bearer,
            clock: clock,
            tickInterval: TimeAmount(configuration.tickInterval),
            logger: logger
        )
        pool = ConnectionPool(
            configuration: .init(
                endpoint: configuration.endpoint,
                tlsContext: tlsContext,
                pool: .init(
                    maximumConnections: configuration.maxConnections,
                    reconnectBaseDelay: TimeAmount(configuration.reconnectBaseDelay),
                    reconnectMaximumDelay: TimeAmount(configuration.reconnectMaximumDelay),
                    maximumQueued: configuration.maximumQueuedRequests
                ),
                connectTimeout: TimeAmount(configuration.connectTimeout),
                requestTimeout: TimeAmount(configuration.requestTimeout),
                maximumResends: configuration.maximumUnprocessedAttempts,
                tickInterval: TimeAmount(configuration.tickInterval),
                assumedStreamsPerConnection: min(configuration.maxStreams ?? Self.assumedStreams, Self.assumedStreams)
            ),
            plugin: plugin,
            group: group,
            logger: logger
        )
        pool.start()
    }

    /// FCM's stream limit is not documented (100 is reported): assumed until a connection's SETTINGS say.
    static let assumedStreams = 100

    /// Runs `body` with a client and shuts it down afterwards, whatever happens.
    public static func withClient<Result: Sendable>(
        configuration: Configuration,
        eventLoopGroup: (any EventLoopGroup)? = nil,
        logger: Logger? = nil,
        _ body: (FCMClient) async throws -> Result
    ) async throws -> Result {
        let client = try FCMClient(configuration: configuration, eventLoopGroup: eventLoopGroup, logger: logger)
        do {
            let result = try await body(client)
            await client.shutdown()
            return result
        } catch {
            await client.shutdown()
            throw error
        }
    }

    /// Queues messages; each outcome goes to its request's receiver exactly once. Never blocks.
    /// Beyond `maximumQueuedRequests` waiting, the excess is answered at once with `.failed(.queueFull)`.
    @discardableResult
    public func submit(_ requests: [FCMSendRequest]) -> [UInt64] {
        pool.submit(requests)
    }

    /// Takes back the messages among `ids` still queued (not yet written to any connection); each
    /// completes with a `cancelled` transport failure. Returns how many were taken back.
    @discardableResult
    public func withdraw(_ ids: some Sequence<UInt64>) -> Int {
        pool.withdraw(poolRequestIDs: Set(ids))
    }

    /// Abandons a message: dequeued if still queued, its stream reset if in flight.
    public func cancel(_ id: UInt64) {
        pool.cancel(poolRequestID: id)
    }

    /// Sends one message to one registration token and waits for the outcome. Cancelling the task
    /// abandons the message and frees its stream.
    public func send(_ message: FCMMessage, to token: String, deadline: NIODeadline? = nil) async -> FCMOutcome {
        let receiver = SingleOutcomeReceiver()
        return await pool.submitAndWait(
            FCMSendRequest(message: message, token: token, receiver: receiver, deadline: deadline),
            resuming: receiver.single
        )
    }

    /// Fetches the access token now, rather than with the first message: a wrong service account or
    /// token endpoint shows here as the exchange's error.
    public func prepare() async throws(FCMCredentialError) {
        try await bearer.prefetch()
    }

    /// Connections it may open times the streams each may carry (the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS, capped by `maxStreams`; 100 assumed until a connection says).
    public var inFlightCapacity: Int { pool.inFlightCapacity }

    /// False while FCM cannot be reached: the last connection attempt failed and none succeeded since.
    public var isFCMReachable: Bool { pool.reachability.isReachable }

    /// How many access tokens were fetched (for metrics and tests).
    public var accessTokenFetches: Int { tokens.fetches }

    /// Queue length, connections (all, usable) and messages in flight: for metrics and tests.
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

    /// Stops intake, fails queued messages with `shutdown`, lets in-flight streams finish for up to
    /// `configuration.shutdownGracePeriod`, closes the connections.
    public func shutdown() async {
        await pool.shutdown(grace: TimeAmount(configuration.shutdownGracePeriod))
        await bearer.shutdown()
        try? await tokenClient.shutdown()
        try? await ownedGroup?.shutdownGracefully()
    }
}

extension FCMClient: Service {
    /// Keeps the client until graceful shutdown (or cancellation), then shuts it down.
    public func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }
}

/// Hands one message's outcome to the task awaiting it.
private final class SingleOutcomeReceiver: FCMOutcomeReceiver {
    let single = SingleOutcome<FCMOutcome>()

    func receive(_ outcome: FCMOutcome, for request: FCMSendRequest) {
        single.resume(outcome)
    }
}
