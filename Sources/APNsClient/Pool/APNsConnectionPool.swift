import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL
import PushgateCore

/// The pool of HTTP/2 connections for one set of credentials and one APNs endpoint.
///
/// All decisions are the state machine's; this class changes state under one lock and carries out the
/// resulting actions (connect, wake, fail) after releasing it (STYLE §2).
final class APNsConnectionPool: APNsConnectionDelegate, @unchecked Sendable {
    // @unchecked: every mutable property is only touched while holding `lock`; the rest is immutable.

    struct Configuration {
        var host: String
        var port: Int
        /// The name sent as SNI and verified against the server certificate (nil for an IP address,
        /// which NIOSSL then verifies against the certificate's IP SANs).
        var serverHostname: String?
        var tlsContext: NIOSSLContext
        var tokenSource: (any APNsProviderTokenSource)?
        var pool: APNsConnectionPoolStateMachine<PooledRequest>.Configuration
        var connection: APNsConnectionStateMachine.Configuration
        var connectTimeout: TimeAmount
        var requestTimeout: TimeAmount
        /// How many times a request APNs never processed (GOAWAY, REFUSED_STREAM) is resent before
        /// it is handed back as retryable.
        var maximumUnprocessedAttempts: Int
        var tickInterval: TimeAmount
        var requestsPerSecondPerConnection: Int?
    }

    private struct ConnectionRecord {
        var eventLoop: any EventLoop
        var channel: (any Channel)?
        var handler: NIOLoopBound<APNsConnectionHandler>?
    }

    private let lock = NIOLock()
    private var machine: APNsConnectionPoolStateMachine<PooledRequest>
    private var connections: [Int: ConnectionRecord] = [:]
    private var nextRequestID: UInt64 = 1
    private var closeFutures: [EventLoopFuture<Void>] = []
    private var poolTick: RepeatedTask?

    let configuration: Configuration
    let group: any EventLoopGroup
    let logger: Logger
    let metrics: APNsClientMetrics
    let reachability = APNsReachability()

    init(configuration: Configuration, group: any EventLoopGroup, logger: Logger, metrics: APNsClientMetrics = .disabled) {
        self.configuration = configuration
        self.group = group
        self.logger = logger
        self.metrics = metrics
        self.machine = APNsConnectionPoolStateMachine(configuration: configuration.pool, seed: UInt64.random(in: 1...UInt64.max))
    }

    func start() {
        let interval = configuration.tickInterval
        let task = group.next().scheduleRepeatedTask(initialDelay: interval, delay: interval) { [weak self] _ in
            self?.tick()
        }
        lock.withLock { poolTick = task }
    }

    // MARK: Submitting

    /// Queues requests; returns the pool ids assigned to them (for cancellation).
    @discardableResult
    func submit(_ requests: [APNsRequest]) -> [UInt64] {
        let now = NIODeadline.now()
        let (ids, actions) = lock.withLock { () -> ([UInt64], APNsConnectionPoolStateMachine<PooledRequest>.Actions) in
            var ids: [UInt64] = []
            ids.reserveCapacity(requests.count)
            let pooled = requests.map { request -> PooledRequest in
                let id = nextRequestID
                nextRequestID += 1
                ids.append(id)
                return PooledRequest(request: request, poolRequestID: id, deadline: request.deadline ?? now + configuration.requestTimeout)
            }
            return (ids, machine.submit(pooled))
        }
        perform(actions)
        return ids
    }

    func cancel(poolRequestID: UInt64) {
        let (queued, records) = lock.withLock { () -> (PooledRequest?, [ConnectionRecord]) in
            if let queued = machine.cancelQueued(requestID: poolRequestID) { return (queued, []) }
            return (nil, Array(connections.values))
        }
        if let queued {
            queued.complete(.failed(.cancelled))
            return
        }
        for record in records {
            guard let handler = record.handler else { continue }
            record.eventLoop.execute {
                _ = handler.value.cancel(poolRequestID: poolRequestID)
            }
        }
    }

    /// Takes back requests that are still queued (never written); they complete as `cancelled`.
    /// Returns how many were withdrawn.
    @discardableResult
    func withdraw(poolRequestIDs: Set<UInt64>) -> Int {
        let withdrawn = lock.withLock { machine.withdrawQueued(requestIDs: poolRequestIDs) }
        for request in withdrawn { request.complete(.failed(.cancelled)) }
        return withdrawn.count
    }

    var statistics: (queued: Int, connections: Int, active: Int, leased: Int) {
        lock.withLock { (machine.queuedCount, machine.connectionCount, machine.activeConnectionCount, machine.leasedCount) }
    }

    // MARK: Shutdown

    /// Fails what is queued, lets connections finish their open streams, and waits for them to close
    /// (forcing them closed after `grace`).
    func shutdown(grace: TimeAmount) async {
        let (actions, task) = lock.withLock { (machine.shutdown(), poolTick) }
        task?.cancel()
        perform(actions)
        let futures = lock.withLock { () -> [EventLoopFuture<Void>] in
            connections.values.compactMap { $0.channel?.closeFuture } + closeFutures
        }
        let loop = group.next()
        let all = EventLoopFuture.andAllComplete(futures, on: loop)
        let timeout = loop.scheduleTask(in: grace) { [weak self] in self?.forceCloseAll() }
        try? await all.get()
        timeout.cancel()
    }

    private func forceCloseAll() {
        let channels = lock.withLock { connections.values.compactMap(\.channel) }
        for channel in channels { channel.close(promise: nil) }
    }

    // MARK: APNsConnectionDelegate (called on connection event loops)

    func connectionReady(_ id: Int, capacity: Int) {
        logger.debug("APNs connection ready", metadata: ["apns.connection_id": "\(id)", "apns.max_streams": "\(capacity)"])
        metrics.connectionsOpened.increment()
        reachability.connected()
        perform(lock.withLock { machine.connectionEstablished(id, availableStreams: capacity) })
    }

    func connectionCapacityChanged(_ id: Int, capacity: Int) {
        perform(lock.withLock { machine.capacityChanged(id, capacity: capacity) })
    }

    func connectionRetiring(_ id: Int) {
        perform(lock.withLock { machine.connectionRetiring(id) })
    }

    func connectionClosed(_ id: Int, everReady: Bool, error: String?) {
        let actions = lock.withLock { () -> APNsConnectionPoolStateMachine<PooledRequest>.Actions in
            connections.removeValue(forKey: id)
            return everReady ? machine.connectionClosed(id) : machine.connectionFailed(id, error: error ?? "connection closed")
        }
        if everReady {
            logger.debug("APNs connection closed", metadata: ["apns.connection_id": "\(id)"])
        } else {
            logger.warning("APNs connection failed", metadata: ["apns.connection_id": "\(id)", "apns.error": "\(error ?? "closed")"])
            metrics.connectionFailures.increment()
            reachability.failed()
        }
        perform(actions)
    }

    func pull(connection id: Int, released: Int, maximum: Int) -> [PooledRequest] {
        let (requests, actions) = lock.withLock { machine.pull(connection: id, released: released, maximum: maximum) }
        perform(actions)
        return requests
    }

    func requeue(_ requests: [PooledRequest], because failure: APNsTransportFailure) {
        var again: [PooledRequest] = []
        again.reserveCapacity(requests.count)
        for var request in requests {
            request.unprocessedAttempts += 1
            if request.unprocessedAttempts > configuration.maximumUnprocessedAttempts {
                request.complete(.failed(failure))
            } else {
                again.append(request)
            }
        }
        guard !again.isEmpty else { return }
        let actions = lock.withLock { machine.requeue(again) }
        perform(actions)
    }

    func providerToken() throws -> ProviderToken? {
        guard let token = try configuration.tokenSource?.providerToken() else { return nil }
        metrics.providerTokenHandedOut(token)
        return token
    }

    func providerTokenRejectedAsExpired(_ token: ProviderToken) {
        metrics.providerTokensRejected.increment()
        configuration.tokenSource?.providerTokenRejectedAsExpired(token)
    }

    func streamAnswered(roundTrip: TimeAmount) {
        metrics.streamAnswered(roundTrip: roundTrip)
    }

    // MARK: Actions

    private func tick() {
        let (actions, queued, connections, active, leased) = lock.withLock {
            (machine.tick(now: .now()), machine.queuedCount, machine.connectionCount, machine.activeConnectionCount, machine.leasedCount)
        }
        // Gauges follow the pool at the tick's pace: nothing on the per-request path.
        metrics.sampled(queued: queued, streamsInUse: leased, connections: connections, activeConnections: active)
        perform(actions)
    }

    private func perform(_ actions: APNsConnectionPoolStateMachine<PooledRequest>.Actions) {
        guard !actions.isEmpty else { return }
        for (request, reason) in actions.fail {
            switch reason {
            case .deadlineExceeded: request.complete(.failed(.deadlineExceeded))
            case .shutdown: request.complete(.failed(.shutdown))
            case .connectFailed(let why): request.complete(.failed(.connectFailed(why)))
            }
        }
        if let id = actions.connect { connect(id) }
        if let (id, delay) = actions.connectAfter {
            logger.debug("reconnecting after back-off", metadata: ["apns.delay_ms": "\(delay.nanoseconds / 1_000_000)"])
            group.next().scheduleTask(in: delay) { [weak self] in
                guard let self else { return }
                self.perform(self.lock.withLock { self.machine.reconnectDelayElapsed(id) })
            }
        }
        if !actions.wake.isEmpty {
            let handlers = lock.withLock { actions.wake.compactMap { connections[$0] } }
            for record in handlers {
                guard let handler = record.handler else { continue }
                record.eventLoop.execute { handler.value.wake() }
            }
        }
        if !actions.close.isEmpty {
            let records = lock.withLock { actions.close.compactMap { connections[$0] } }
            for record in records {
                if let handler = record.handler {
                    record.eventLoop.execute { handler.value.closeGracefully() }
                } else {
                    record.channel?.close(promise: nil)
                }
            }
        }
    }

    private func connect(_ id: Int) {
        let loop = group.next()
        lock.withLock { connections[id] = ConnectionRecord(eventLoop: loop, channel: nil, handler: nil) }
        logger.debug(
            "connecting to APNs",
            metadata: ["apns.connection_id": "\(id)", "apns.host": "\(configuration.host)", "apns.port": "\(configuration.port)"])
        let configuration = self.configuration
        let logger = self.logger
        ClientBootstrap(group: loop)
            .connectTimeout(configuration.connectTimeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { [weak self] channel in
                channel.eventLoop.makeCompletedFuture {
                    guard let self else { throw ChannelError.ioOnClosedChannel }
                    let tls = try NIOSSLClientHandler(context: configuration.tlsContext, serverHostname: configuration.serverHostname)
                    try channel.pipeline.syncOperations.addHandler(tls)
                    let handler = APNsConnectionHandler(
                        connectionID: id, delegate: self,
                        configuration: .init(
                            connection: configuration.connection, authority: configuration.host,
                            tickInterval: configuration.tickInterval, requestsPerSecond: configuration.requestsPerSecondPerConnection,
                            logger: logger),
                        now: channel.eventLoop.now)
                    try channel.pipeline.syncOperations.addHandler(handler)
                    let bound = NIOLoopBound(handler, eventLoop: channel.eventLoop)
                    self.lock.withLock {
                        self.connections[id]?.channel = channel
                        self.connections[id]?.handler = bound
                    }
                }
            }
            .connect(host: configuration.host, port: configuration.port)
            .whenFailure { [weak self] error in
                guard let self else { return }
                let description = APNsConnectionHandler.describe(error)
                logger.warning("APNs connect failed", metadata: ["apns.connection_id": "\(id)", "apns.error": "\(description)"])
                self.metrics.connectionFailures.increment()
                self.reachability.failed()
                let actions = self.lock.withLock { () -> APNsConnectionPoolStateMachine<PooledRequest>.Actions in
                    self.connections.removeValue(forKey: id)
                    return self.machine.connectionFailed(id, error: description)
                }
                self.perform(actions)
            }
    }
}
