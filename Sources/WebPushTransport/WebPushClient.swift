public import Logging
public import NIOCore
import NIOSSL
public import PushTransport
public import PushgateCore
public import ServiceLifecycle
import Synchronization
public import WebPush

/// A transport to Web Push services (RFC 8030): a ``WebPushSendRequest``'s pool, or a test's stand-in.
public protocol WebPushNotificationTransport: PushNotificationTransport where Submission == WebPushSendRequest {}

/// A client for Web Push services: one VAPID key (one app), a pool of connections per origin.
///
/// - **Pools.** Each origin (`https://host[:port]`) gets the transport layer's pool (``ConnectionPool``)
///   when its first message comes: connections are opened on demand, at most
///   ``Configuration/maximumConnectionsPerOrigin`` per origin and ``Configuration/maximumConnections`` over
///   all (a connection over the overall cap waits for another to close), and closed after
///   ``Configuration/idleTimeout`` without requests.
/// - **Protocol.** ALPN offers `h2` and `http/1.1`: HTTP/2 carries as many messages at once as the server's
///   SETTINGS allow; HTTP/1.1 keep-alive one per connection (so a busy origin gets several).
/// - **VAPID.** One token per origin (``VAPIDTokenCache``), signed on first use, re-signed before `exp`;
///   a 401/403 drops it and resends the message once with a fresh one, refused again it completes as
///   a configuration alarm.
/// - **Lost connections.** Messages written and unanswered when a connection drops are sent again on a
///   fresh connection (up to ``Configuration/maximumResends``); those whose answer was read never are.
///
/// Lifecycle, as every push client: `init` opens nothing; `run()` (a `Service`) keeps it until graceful
/// shutdown, then lets written messages finish (up to the grace period) and closes every connection.
public final class WebPushClient: WebPushNotificationTransport, Service {
    public typealias Submission = WebPushSendRequest
    typealias Pool = ConnectionPool<WebPushPlugin>

    public let configuration: Configuration

    /// A pool's request ids are its own: the client's id puts the pool's index in the top bits.
    private static let poolIndexShift: UInt64 = 40

    private let pools: WebPushOriginPools
    private let credentials: WebPushVAPIDCredentials
    private let budget: WebPushConnectionBudget
    private let tlsContext: NIOSSLContext
    private let loops: TransportEventLoops
    private let logger: Logger

    public convenience init(
        configuration: Configuration,
        eventLoopGroup: (any EventLoopGroup)? = nil,
        logger: Logger? = nil,
        metrics: WebPushClientMetrics = .disabled
    ) throws {
        try self.init(
            configuration: configuration,
            eventLoopGroup: eventLoopGroup,
            logger: logger,
            clock: SystemWallClock(),
            metrics: metrics
        )
    }

    /// - Parameter clock: the wall clock of VAPID tokens' `exp` and `Retry-After` dates.
    public init(
        configuration: Configuration,
        eventLoopGroup: (any EventLoopGroup)? = nil,
        logger: Logger? = nil,
        clock: any WallClock,
        metrics: WebPushClientMetrics = .disabled
    ) throws {
        self.configuration = try configuration.validated()
        self.logger = logger ?? Logger(label: "pushgate.webpush")
        credentials = WebPushVAPIDCredentials(
            key: configuration.vapidKey,
            subject: configuration.subject,
            cache: configuration.vapidTokens,
            clock: clock,
            metrics: metrics
        )
        let pools = WebPushOriginPools()
        self.pools = pools
        budget = WebPushConnectionBudget(maximumConnections: configuration.maximumConnections) { [weak pools] origin in
            pools?.retireIdleConnection(except: origin)
        }
        tlsContext = try TransportTLS.makeContext(
            trustRoots: configuration.trustRoots,
            certificate: nil,
            applicationProtocols: ["h2", "http/1.1"]
        )
        loops = TransportEventLoops(eventLoopGroup, threads: configuration.eventLoopThreads)
    }

    // MARK: Sending

    /// Queues messages, each to its origin's pool; each outcome goes to its receiver exactly once. Never
    /// blocks. Returns ids usable with ``withdraw(_:)``, one per request, in order.
    @discardableResult
    public func submit(_ requests: [WebPushSendRequest]) -> [UInt64] {
        guard let first = requests.first else { return [] }
        // One origin (a broadcast to one push service, the common case): one hand-off.
        if requests.allSatisfy({ $0.origin == first.origin }) {
            guard let (index, pool) = pool(for: first.origin) else {
                for request in requests { request.fail(.shutdown) }
                return requests.map { _ in 0 }
            }
            return pool.submit(requests).map { Self.clientID(pool: index, request: $0) }
        }
        var ids = [UInt64](repeating: 0, count: requests.count)
        var byOrigin: [WebPushOrigin: [Int]] = [:]
        for (position, request) in requests.enumerated() { byOrigin[request.origin, default: []].append(position) }
        for (origin, positions) in byOrigin {
            guard let (index, pool) = pool(for: origin) else {
                for position in positions { requests[position].fail(.shutdown) }
                continue
            }
            let poolIDs = pool.submit(positions.map { requests[$0] })
            for (position, id) in zip(positions, poolIDs) { ids[position] = Self.clientID(pool: index, request: id) }
        }
        return ids
    }

    /// Takes back the messages among `ids` still queued (never written); each completes `cancelled`.
    @discardableResult
    public func withdraw(_ ids: some Sequence<UInt64>) -> Int {
        var byPool: [Int: Set<UInt64>] = [:]
        for id in ids {
            byPool[Int(id >> Self.poolIndexShift), default: []].insert(id & ((1 << Self.poolIndexShift) - 1))
        }
        let pools = self.pools.state.withLock { $0.byIndex }
        return byPool.reduce(0) { count, entry in
            guard entry.key < pools.count else { return count }
            return count + pools[entry.key].withdraw(poolRequestIDs: entry.value)
        }
    }

    /// Messages worth having unanswered at once: what the open origins' pools can carry, and at least
    /// one origin's worth before the first message (HTTP/2 streams assumed until a server says).
    public var inFlightCapacity: Int {
        let open = pools.state.withLock { $0.byIndex }.reduce(0) { $0 + $1.inFlightCapacity }
        let assumed = configuration.assumedStreamsPerConnection
        return min(
            max(open, configuration.maximumConnectionsPerOrigin * assumed),
            configuration.maximumConnections * assumed
        )
    }

    /// Connections (all, and taking work), queued and in-flight messages over every origin.
    public var statistics: TransportStatistics {
        let pools = self.pools.state.withLock { $0.byIndex }
        var total = TransportStatistics(queued: 0, connections: 0, activeConnections: 0, inFlight: 0)
        for pool in pools {
            let (queued, connections, active, leased) = pool.statistics
            total.queued += queued
            total.connections += connections
            total.activeConnections += active
            total.inFlight += leased
        }
        return total
    }

    /// How many VAPID tokens were signed (one per origin, then one per refresh, refusal or renewal).
    public var vapidSignatures: Int { credentials.signatures }

    /// The VAPID key and subject tokens are signed with now: ``Configuration/vapidKey`` and
    /// ``Configuration/subject`` until a ``renew(vapidKey:subject:)``.
    public var vapid: (key: VAPIDKey, subject: VAPIDSubject) { credentials.current }

    /// A new VAPID key and subject (a reload): every origin's token is signed again with them for its next
    /// message; messages already written keep theirs. The connections stay open (VAPID is per request,
    /// not per connection). A subscription made for the old key's `applicationServerKey` is refused by
    /// its push service (401/403, a configuration alarm) until the browser subscribes again.
    public func renew(vapidKey: VAPIDKey, subject: VAPIDSubject) {
        credentials.renew(key: vapidKey, subject: subject)
        logger.debug("VAPID key renewed")
    }

    private static func clientID(pool index: UInt64, request id: UInt64) -> UInt64 {
        index << poolIndexShift | id
    }

    /// The origin's pool, made (and started) on its first message; nil once shut down.
    private func pool(for origin: WebPushOrigin) -> (UInt64, Pool)? {
        if let found = pools.state.withLock({ $0.isShutDown ? nil : $0.byOrigin[origin] }) { return found }
        let made = makePool(for: origin)
        let (entry, isNew) = pools.state.withLock { pools -> ((UInt64, Pool)?, Bool) in
            guard !pools.isShutDown else { return (nil, false) }
            if let existing = pools.byOrigin[origin] { return (existing, false) }
            let entry = (index: UInt64(pools.byIndex.count), pool: made)
            pools.byOrigin[origin] = entry
            pools.byIndex.append(made)
            return (entry, true)
        }
        if isNew {
            made.start()
            logger.debug("Web Push origin pool created", metadata: ["webpush.origin": "\(origin)"])
        }
        return entry
    }

    private func makePool(for origin: WebPushOrigin) -> Pool {
        let configuration = self.configuration
        let authority = origin.port == 443 ? origin.host : "\(origin.host):\(origin.port)"
        var logger = self.logger
        logger[metadataKey: "webpush.origin"] = "\(origin)"
        return Pool(
            configuration: .init(
                endpoint: Endpoint(host: origin.connectHost, port: origin.port),
                tlsContext: tlsContext,
                pool: .init(
                    maximumConnections: configuration.maximumConnectionsPerOrigin,
                    reconnectBaseDelay: TimeAmount(configuration.reconnectBaseDelay),
                    reconnectMaximumDelay: TimeAmount(configuration.reconnectMaximumDelay),
                    maximumQueued: configuration.maximumQueuedRequestsPerOrigin
                ),
                connectTimeout: TimeAmount(configuration.connectTimeout),
                requestTimeout: TimeAmount(configuration.requestTimeout),
                maximumResends: configuration.maximumResends,
                tickInterval: TimeAmount(configuration.tickInterval),
                assumedStreamsPerConnection: configuration.assumedStreamsPerConnection
            ),
            plugin: WebPushPlugin(
                origin: origin,
                authority: authority,
                credentials: credentials,
                budget: budget,
                releaseIdle: { [weak pools = self.pools] origin in pools?.retireIdleConnection(of: origin) },
                http2: .init(
                    pingInterval: configuration.pingInterval.map(TimeAmount.init),
                    pingTimeout: TimeAmount(configuration.pingTimeout),
                    idleTimeout: configuration.idleTimeout.map(TimeAmount.init),
                    maximumStreams: configuration.maximumStreamsPerConnection
                )
            ),
            group: loops.group,
            logger: logger
        )
    }

    // MARK: Lifecycle

    /// Stops intake (later messages fail `shutdown`), fails queued ones with `shutdown`, lets written
    /// ones finish for up to the grace period, closes every connection, then the event loops it owns.
    public func shutdown() async {
        let pools = self.pools.state.withLock { pools -> [Pool] in
            pools.isShutDown = true
            return pools.byIndex
        }
        budget.shutdown()
        let grace = TimeAmount(configuration.shutdownGracePeriod)
        await withTaskGroup(of: Void.self) { group in
            for pool in pools { group.addTask { await pool.shutdown(grace: grace) } }
        }
        await loops.shutdownOwned()
    }

    /// Keeps the client until graceful shutdown (or cancellation), then shuts it down.
    public func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }

    /// Runs `body` with a client and shuts it down afterwards, whatever happens.
    public static func withClient<Result: Sendable>(
        configuration: Configuration,
        eventLoopGroup: (any EventLoopGroup)? = nil,
        logger: Logger? = nil,
        clock: any WallClock = SystemWallClock(),
        metrics: WebPushClientMetrics = .disabled,
        _ body: (WebPushClient) async throws -> Result
    ) async throws -> Result {
        let client = try WebPushClient(
            configuration: configuration,
            eventLoopGroup: eventLoopGroup,
            logger: logger,
            clock: clock,
            metrics: metrics
        )
        do {
            let result = try await body(client)
            await client.shutdown()
            return result
        } catch {
            await client.shutdown()
            throw error
        }
    }
}

/// The pools of a ``WebPushClient``, one per origin, by origin and by index (the top bits of the client's
/// request ids).
final class WebPushOriginPools: Sendable {
    struct Pools {
        var byOrigin: [WebPushOrigin: (index: UInt64, pool: ConnectionPool<WebPushPlugin>)] = [:]
        var byIndex: [ConnectionPool<WebPushPlugin>] = []
        var isShutDown = false
    }

    let state = Mutex(Pools())

    /// A connection of `origin` waits for a slot of the overall cap: one connection of another origin that
    /// holds nothing closes, if there is one now (otherwise the first pool to find itself idle at its tick
    /// gives one up, ``WebPushPlugin/sampled(queued:inFlight:connections:activeConnections:)``).
    func retireIdleConnection(except origin: WebPushOrigin) {
        let others = state.withLock { pools in pools.byOrigin.filter { $0.key != origin }.map(\.value.pool) }
        for pool in others where pool.retireIdleConnection() { return }
    }

    func retireIdleConnection(of origin: WebPushOrigin) {
        state.withLock { $0.byOrigin[origin]?.pool }?.retireIdleConnection()
    }
}
