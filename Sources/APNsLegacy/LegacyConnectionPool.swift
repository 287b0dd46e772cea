import APNsClient
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import PushgateCore

/// A request inside the legacy pool: the caller's request and how often it was sent again.
struct LegacyPooledRequest: PoolableRequest {
    var request: APNsRequest
    let poolRequestID: UInt64
    let deadline: NIODeadline
    /// Times it went back to the queue with its fate unknown or after another's error.
    var resends = 0

    func complete(_ outcome: APNsOutcome) {
        request.receiver.receive(outcome, for: request)
    }
}

/// The legacy gateway's connections. The decisions (which connection takes work, when to open one,
/// back-off, deadlines) are the HTTP/2 client's pool state machine: a legacy connection's "streams"
/// are its window of unconfirmed notifications. This class changes state under one lock and carries
/// out the actions after releasing it (STYLE §2).
final class LegacyConnectionPool: LegacyConnectionDelegate, @unchecked Sendable {
    // @unchecked: every mutable property is only touched while holding `lock`; the rest is immutable.

    struct Configuration {
        var endpoint: APNsClient.Endpoint
        var tlsContext: NIOSSLContext
        var pool: APNsConnectionPoolStateMachine<LegacyPooledRequest>.Configuration
        var quietTime: TimeAmount
        var windowSize: Int
        var maximumResends: Int
        var requestTimeout: TimeAmount
        var connectTimeout: TimeAmount
        var tickInterval: TimeAmount
    }

    private struct ConnectionRecord {
        var eventLoop: any EventLoop
        var channel: (any Channel)?
        var handler: NIOLoopBound<LegacyConnectionHandler>?
    }

    typealias Machine = APNsConnectionPoolStateMachine<LegacyPooledRequest>

    private let lock = NIOLock()
    private var machine: Machine
    private var connections: [Int: ConnectionRecord] = [:]
    private var nextRequestID: UInt64 = 1
    private var poolTick: RepeatedTask?

    let configuration: Configuration
    let group: any EventLoopGroup
    let logger: Logger

    init(configuration: Configuration, group: any EventLoopGroup, logger: Logger) {
        self.configuration = configuration
        self.group = group
        self.logger = logger
        self.machine = Machine(configuration: configuration.pool, seed: UInt64.random(in: 1...UInt64.max))
    }

    func start() {
        let interval = configuration.tickInterval
        let task = group.next().scheduleRepeatedTask(initialDelay: interval, delay: interval) { [weak self] _ in
            guard let self else { return }
            self.perform(self.lock.withLock { self.machine.tick(now: .now()) })
        }
        lock.withLock { poolTick = task }
    }

    // MARK: Intake

    func submit(_ requests: [APNsRequest]) -> [UInt64] {
        let now = NIODeadline.now()
        let (ids, actions) = lock.withLock { () -> ([UInt64], Machine.Actions) in
            var ids: [UInt64] = []
            ids.reserveCapacity(requests.count)
            let pooled = requests.map { request -> LegacyPooledRequest in
                let id = nextRequestID
                nextRequestID += 1
                ids.append(id)
                return LegacyPooledRequest(
                    request: request,
                    poolRequestID: id,
                    deadline: request.deadline ?? now + configuration.requestTimeout
                )
            }
            return (ids, machine.submit(pooled))
        }
        perform(actions)
        return ids
    }

    func withdraw(_ ids: Set<UInt64>) -> Int {
        let withdrawn = lock.withLock { machine.withdrawQueued(requestIDs: ids) }
        for request in withdrawn { request.complete(.failed(.cancelled)) }
        return withdrawn.count
    }

    var statistics: LegacySender.Statistics {
        lock.withLock {
            LegacySender.Statistics(
                queued: machine.queuedCount,
                connections: machine.connectionCount,
                activeConnections: machine.activeConnectionCount,
                unconfirmed: machine.leasedCount
            )
        }
    }

    func shutdown(grace: TimeAmount) async {
        let (actions, task) = lock.withLock { (machine.shutdown(), poolTick) }
        task?.cancel()
        perform(actions)
        let futures = lock.withLock { connections.values.compactMap { $0.channel?.closeFuture } }
        let loop = group.next()
        let timeout = loop.scheduleTask(in: grace) { [weak self] in
            guard let self else { return }
            for channel in self.lock.withLock({ self.connections.values.compactMap(\.channel) }) {
                channel.close(promise: nil)
            }
        }
        try? await EventLoopFuture.andAllComplete(futures, on: loop).get()
        timeout.cancel()
    }

    // MARK: LegacyConnectionDelegate (called on connection event loops)

    func connectionReady(_ id: Int) {
        logger.debug("legacy connection ready", metadata: ["apns.connection_id": "\(id)"])
        perform(lock.withLock { machine.connectionEstablished(id, availableStreams: configuration.windowSize) })
    }

    func connectionRetiring(_ id: Int) {
        perform(lock.withLock { machine.connectionRetiring(id) })
    }

    func connectionClosed(_ id: Int, everReady: Bool, error: String?) {
        let actions = lock.withLock { () -> Machine.Actions in
            connections.removeValue(forKey: id)
            return everReady
                ? machine.connectionClosed(id) : machine.connectionFailed(id, error: error ?? "connection closed")
        }
        if everReady {
            logger.debug("legacy connection closed", metadata: ["apns.connection_id": "\(id)"])
        } else {
            logger.warning(
                "legacy connection failed",
                metadata: ["apns.connection_id": "\(id)", "apns.error": "\(error ?? "closed")"]
            )
        }
        perform(actions)
    }

    func pull(connection id: Int, released: Int, maximum: Int) -> [LegacyPooledRequest] {
        let (requests, actions) = lock.withLock { machine.pull(connection: id, released: released, maximum: maximum) }
        perform(actions)
        return requests
    }

    func resend(_ requests: [LegacyPooledRequest]) {
        var again: [LegacyPooledRequest] = []
        again.reserveCapacity(requests.count)
        for var request in requests {
            request.resends += 1
            if request.resends > configuration.maximumResends {
                request.complete(.failed(.connectionLost))
            } else {
                again.append(request)
            }
        }
        guard !again.isEmpty else { return }
        perform(lock.withLock { machine.requeue(again) })
    }

    // MARK: Actions

    private func perform(_ actions: Machine.Actions) {
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
                    record.eventLoop.execute { handler.value.closeWhenConfirmed() }
                } else {
                    record.channel?.close(promise: nil)
                }
            }
        }
    }

    private func connect(_ id: Int) {
        let loop = group.next()
        lock.withLock { connections[id] = ConnectionRecord(eventLoop: loop, channel: nil, handler: nil) }
        let configuration = self.configuration
        let logger = self.logger
        logger.debug("connecting to the legacy gateway", metadata: ["apns.connection_id": "\(id)"])
        let endpoint = configuration.endpoint
        ClientBootstrap(group: loop)
            .connectTimeout(configuration.connectTimeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { [weak self] channel in
                channel.eventLoop.makeCompletedFuture {
                    guard let self else { throw ChannelError.ioOnClosedChannel }
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(
                        try NIOSSLClientHandler(
                            context: configuration.tlsContext,
                            serverHostname: endpoint.isIPAddress ? nil : endpoint.host
                        )
                    )
                    try sync.addHandler(ByteToMessageHandler(LegacyErrorResponseDecoder()))
                    let handler = LegacyConnectionHandler(
                        connectionID: id,
                        delegate: self,
                        window: LegacyConnectionStateMachine(quietTime: configuration.quietTime),
                        windowSize: configuration.windowSize,
                        tickInterval: configuration.tickInterval,
                        logger: logger
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
                let description = LegacyTLS.describe(error)
                logger.warning(
                    "legacy gateway connect failed",
                    metadata: ["apns.connection_id": "\(id)", "apns.error": "\(description)"]
                )
                let actions = self.lock.withLock { () -> Machine.Actions in
                    self.connections.removeValue(forKey: id)
                    return self.machine.connectionFailed(id, error: description)
                }
                self.perform(actions)
            }
    }
}
