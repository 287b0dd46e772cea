package import Logging
import NIOConcurrencyHelpers
package import NIOCore
package import NIOSSL
package import PushgateCore
import Synchronization

/// The pool of connections of one transport: one set of credentials, one endpoint, one plug-in (APNs
/// over HTTP/2, the legacy binary protocol, ...) that owns the codec and connection handler.
///
/// All decisions are the state machine's; this class changes state under one lock and carries out the
/// resulting actions (connect, wake, fail) after releasing it (STYLE §2).
package final class ConnectionPool<Plugin: TransportPlugin>: @unchecked Sendable {
    // @unchecked: every mutable property is only touched while holding `lock`; the rest is immutable.
    package typealias Request = Plugin.Request
    package typealias Machine = ConnectionPoolStateMachine<Request>

    package struct Configuration: Sendable {
        package var endpoint: Endpoint
        package var tlsContext: NIOSSLContext
        package var pool: Machine.Configuration
        package var connectTimeout: TimeAmount
        /// A request without its own deadline fails this long after it was submitted if it is still queued;
        /// once written, it waits this long for its answer from then (the connection's `answerTimeout`).
        package var requestTimeout: TimeAmount
        /// How many times a request that went back to the queue unanswered (never processed, or its
        /// fate unknown) is sent again before it fails with the plug-in's failure.
        package var maximumResends: Int
        package var tickInterval: TimeAmount
        /// What a connection is taken to carry until one reports its own capacity (for `inFlightCapacity`).
        package var assumedStreamsPerConnection: Int

        package init(
            endpoint: Endpoint,
            tlsContext: NIOSSLContext,
            pool: Machine.Configuration,
            connectTimeout: TimeAmount,
            requestTimeout: TimeAmount,
            maximumResends: Int,
            tickInterval: TimeAmount,
            assumedStreamsPerConnection: Int
        ) {
            self.assumedStreamsPerConnection = assumedStreamsPerConnection
            self.endpoint = endpoint
            self.tlsContext = tlsContext
            self.pool = pool
            self.connectTimeout = connectTimeout
            self.requestTimeout = requestTimeout
            self.maximumResends = maximumResends
            self.tickInterval = tickInterval
        }
    }

    private struct ConnectionRecord {
        var eventLoop: any EventLoop
        var channel: (any Channel)?
        var handler: NIOLoopBound<Plugin.Connection>?
    }

    private let lock = NIOLock()
    private var machine: Machine
    private var connections: [Int: ConnectionRecord] = [:]
    private var nextRequestID: UInt64 = 1
    private var poolTick: RepeatedTask?
    /// What new connections are made with: `configuration.tlsContext` until ``renewConnections(tlsContext:_:)``.
    private var tlsContext: NIOSSLContext

    package let configuration: Configuration
    package let plugin: Plugin
    package let group: any EventLoopGroup
    package let logger: Logger
    package let reachability = Reachability()
    /// The capacity the latest connection reported (SETTINGS, or the plug-in's window): read without the lock.
    private let streamsPerConnection: Synchronization.Atomic<Int>

    package init(configuration: Configuration, plugin: Plugin, group: any EventLoopGroup, logger: Logger) {
        self.configuration = configuration
        self.plugin = plugin
        self.group = group
        self.logger = logger
        self.machine = Machine(configuration: configuration.pool, seed: UInt64.random(in: 1...UInt64.max))
        self.tlsContext = configuration.tlsContext
        self.streamsPerConnection = Synchronization.Atomic(configuration.assumedStreamsPerConnection)
    }

    /// Requests the pool can have unanswered at once: the connections it may open times what the latest
    /// connection said it carries. Cheap (one atomic load); follows SETTINGS changes.
    package var inFlightCapacity: Int {
        configuration.pool.maximumConnections * streamsPerConnection.load(ordering: .relaxed)
    }

    package func start() {
        let interval = configuration.tickInterval
        let task = group.next().scheduleRepeatedTask(initialDelay: interval, delay: interval) { [weak self] _ in
            self?.tick()
        }
        lock.withLock { poolTick = task }
    }

    // MARK: Submitting

    /// Queues requests; returns the pool ids assigned to them (for cancellation).
    @discardableResult
    package func submit(_ requests: [Request.Submission]) -> [UInt64] {
        let now = NIODeadline.now()
        let (ids, actions) = lock.withLock { () -> ([UInt64], Machine.Actions) in
            var ids: [UInt64] = []
            ids.reserveCapacity(requests.count)
            let pooled = requests.map { request -> Request in
                let id = nextRequestID
                nextRequestID += 1
                ids.append(id)
                let deadline = request.deadline ?? now + configuration.requestTimeout
                return Request(request: request, poolRequestID: id, deadline: deadline)
            }
            return (ids, machine.submit(pooled))
        }
        perform(actions)
        return ids
    }

    /// Abandons a request: dequeued if still queued, else the connections that may hold it are asked
    /// to drop it (a plug-in that cannot leaves it to finish).
    package func cancel(poolRequestID: UInt64) {
        let (queued, records) = lock.withLock { () -> (Request?, [ConnectionRecord]) in
            if let queued = machine.cancelQueued(requestID: poolRequestID) { return (queued, []) }
            return (nil, Array(connections.values))
        }
        if let queued {
            queued.fail(.cancelled)
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
    package func withdraw(poolRequestIDs: Set<UInt64>) -> Int {
        let withdrawn = lock.withLock { machine.withdrawQueued(requestIDs: poolRequestIDs) }
        for request in withdrawn { request.fail(.cancelled) }
        return withdrawn.count
    }

    package var statistics: (queued: Int, connections: Int, active: Int, leased: Int) {
        lock.withLock {
            (machine.queuedCount, machine.connectionCount, machine.activeConnectionCount, machine.leasedCount)
        }
    }

    // MARK: Credentials

    /// New credentials (a reload): connections opened from now on use `tlsContext` (nil: the current one)
    /// and whatever `change` installs in the plug-in; the connections open now take nothing new, finish
    /// what they hold and close. `change` runs under the pool's lock, so no connection is made between
    /// it and the retiring of the old ones. Returns how many open connections were retired.
    @discardableResult
    package func renewConnections(tlsContext: NIOSSLContext?, _ change: () -> Void = {}) -> Int {
        let (actions, retired) = lock.withLock { () -> (Machine.Actions, Int) in
            if let tlsContext { self.tlsContext = tlsContext }
            change()
            let actions = machine.credentialsRenewed()
            return (actions, actions.close.count)
        }
        logger.debug(
            "\(plugin.serviceName) credentials renewed; new connections use them",
            metadata: ["connection.draining": "\(retired)"]
        )
        perform(actions)
        return retired
    }

    /// Retires one connection that holds no request, for another pool that shares a cap on connections
    /// with this one (``ConnectionPoolStateMachine/idleConnectionWanted()``). Returns whether there was one.
    @discardableResult
    package func retireIdleConnection() -> Bool {
        let actions = lock.withLock { machine.idleConnectionWanted() }
        perform(actions)
        return !actions.close.isEmpty
    }

    // MARK: Shutdown

    /// Fails what is queued, lets connections finish what they hold, and waits for them to close
    /// (forcing them closed after `grace`).
    package func shutdown(grace: TimeAmount) async {
        let (actions, task) = lock.withLock { (machine.shutdown(), poolTick) }
        task?.cancel()
        perform(actions)
        let futures = lock.withLock { connections.values.compactMap { $0.channel?.closeFuture } }
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

    // MARK: Connection events (called on connection event loops)

    /// The connection is usable and may hold `capacity` requests at once.
    package func connectionReady(_ id: Int, capacity: Int) {
        logger.debug(
            "\(plugin.serviceName) connection ready",
            metadata: ["connection.id": "\(id)", "connection.max_streams": "\(capacity)"]
        )
        plugin.connectionOpened()
        reachability.connected()
        streamsPerConnection.store(capacity, ordering: .relaxed)
        perform(lock.withLock { machine.connectionEstablished(id, availableStreams: capacity) })
    }

    package func connectionCapacityChanged(_ id: Int, capacity: Int) {
        streamsPerConnection.store(capacity, ordering: .relaxed)
        perform(lock.withLock { machine.capacityChanged(id, capacity: capacity) })
    }

    /// The connection takes no new work; it finishes what it holds.
    package func connectionRetiring(_ id: Int) {
        perform(lock.withLock { machine.connectionRetiring(id) })
    }

    /// The channel closed. `everReady` false means the connection attempt failed (TLS, protocol).
    package func connectionClosed(_ id: Int, everReady: Bool, error: String?) {
        plugin.connectionEnded(id: id)
        let actions = lock.withLock { () -> Machine.Actions in
            connections.removeValue(forKey: id)
            return everReady
                ? machine.connectionClosed(id) : machine.connectionFailed(id, error: error ?? "connection closed")
        }
        if everReady {
            logger.debug("\(plugin.serviceName) connection closed", metadata: ["connection.id": "\(id)"])
        } else {
            logger.warning(
                "\(plugin.serviceName) connection failed",
                metadata: ["connection.id": "\(id)", "connection.error": "\(error ?? "closed")"]
            )
            connectAttemptFailed()
        }
        perform(actions)
    }

    /// Hands back `released` finished requests and takes up to `maximum` new ones.
    package func pull(connection id: Int, released: Int, maximum: Int) -> [Request] {
        let (requests, actions) = lock.withLock { machine.pull(connection: id, released: released, maximum: maximum) }
        perform(actions)
        return requests
    }

    /// Requests that went back unanswered: queued again, or failed with `failure` once their resends are spent.
    package func requeue(_ requests: [Request], because failure: PushTransportFailure) {
        var again: [Request] = []
        again.reserveCapacity(requests.count)
        for var request in requests {
            request.resends += 1
            if request.resends > configuration.maximumResends {
                request.fail(failure)
            } else {
                again.append(request)
            }
        }
        guard !again.isEmpty else { return }
        perform(lock.withLock { machine.requeue(again) })
    }

    // MARK: Actions

    private func tick() {
        let (actions, queued, connections, active, leased) = lock.withLock {
            (
                machine.tick(now: .now()), machine.queuedCount, machine.connectionCount,
                machine.activeConnectionCount, machine.leasedCount
            )
        }
        // Gauges follow the pool at the tick's pace: nothing on the per-request path.
        plugin.sampled(queued: queued, inFlight: leased, connections: connections, activeConnections: active)
        perform(actions)
    }

    private func connectAttemptFailed() {
        plugin.connectionFailed()
        reachability.failed()
    }

    private func perform(_ actions: Machine.Actions) {
        guard !actions.isEmpty else { return }
        for (request, reason) in actions.fail {
            switch reason {
            case .deadlineExceeded: request.fail(.deadlineExceeded)
            case .shutdown: request.fail(.shutdown)
            case .connectFailed(let why): request.fail(.connectFailed(why))
            case .queueFull: request.fail(.queueFull)
            }
        }
        if let id = actions.connect { connect(id) }
        if let (id, delay) = actions.connectAfter {
            logger.debug(
                "reconnecting after back-off",
                metadata: ["connection.delay_ms": "\(delay.nanoseconds / 1_000_000)"]
            )
            group.next().scheduleTask(in: delay) { [weak self] in
                guard let self else { return }
                self.perform(self.lock.withLock { self.machine.reconnectDelayElapsed(id) })
            }
        }
        if !actions.wake.isEmpty {
            let records = lock.withLock { actions.wake.compactMap { connections[$0] } }
            for record in records {
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
        plugin.admitConnection(id: id) { [weak self] in self?.open(id) }
    }

    private func open(_ id: Int) {
        let loop = group.next()
        lock.withLock { connections[id] = ConnectionRecord(eventLoop: loop, channel: nil, handler: nil) }
        let endpoint = configuration.endpoint
        logger.debug(
            "connecting to \(plugin.serviceName)",
            metadata: [
                "connection.id": "\(id)", "connection.host": "\(endpoint.host)", "connection.port": "\(endpoint.port)",
            ]
        )
        let tlsContext = lock.withLock { self.tlsContext }
        TransportBootstrap.make(group: loop, connectTimeout: configuration.connectTimeout)
            .channelInitializer { [weak self] channel in
                channel.eventLoop.makeCompletedFuture {
                    guard let self else { throw ChannelError.ioOnClosedChannel }
                    try TransportBootstrap.addTLS(to: channel, endpoint: endpoint, context: tlsContext)
                    let sync = channel.pipeline.syncOperations
                    try self.plugin.addDecoders(to: sync)
                    let handler = self.plugin.makeConnection(
                        TransportConnectionContext(
                            id: id,
                            pool: self,
                            tickInterval: self.configuration.tickInterval,
                            logger: self.logger,
                            now: channel.eventLoop.now
                        )
                    )
                    try sync.addHandler(handler)
                    let bound = NIOLoopBound(handler, eventLoop: channel.eventLoop)
                    self.lock.withLock {
                        self.connections[id]?.channel = channel
                        self.connections[id]?.handler = bound
                    }
                }
            }
            .connect(host: endpoint.host, port: endpoint.port)
            .whenFailure { [weak self] error in
                guard let self else { return }
                let description = TransportTLS.describe(error)
                self.logger.warning(
                    "\(self.plugin.serviceName) connect failed",
                    metadata: ["connection.id": "\(id)", "connection.error": "\(description)"]
                )
                self.connectAttemptFailed()
                self.plugin.connectionEnded(id: id)
                let actions = self.lock.withLock { () -> Machine.Actions in
                    self.connections.removeValue(forKey: id)
                    return self.machine.connectionFailed(id, error: description)
                }
                self.perform(actions)
            }
    }
}
