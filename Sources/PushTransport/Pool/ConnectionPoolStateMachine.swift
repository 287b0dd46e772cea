import DequeModule
public import NIOCore

/// What the pool needs to know about a queued request.
public protocol PoolableRequest: Sendable {
    /// Unique within the pool, for cancellation.
    var poolRequestID: UInt64 { get }
    var deadline: NIODeadline { get }
    /// A request that must not wait behind a broadcast (a one-device request's notification): it goes
    /// to the pool's express connection (``ConnectionPoolStateMachine``).
    var isExpress: Bool { get }
}

extension PoolableRequest {
    public var isExpress: Bool { false }
}

/// The decisions of a pool of connections to a push service: which connection takes queued work, when to open
/// another connection, how long to back off after failures, which requests have waited too long.
///
/// Work is *pulled*: a connection with free streams asks for up to that many requests at once and
/// writes them in one flush. A connection that asked and got nothing is *parked*; a new request
/// wakes one parked connection (one wake-up per burst, not per request).
///
/// **An express lane.** Requests marked ``PoolableRequest/isExpress`` (one-device requests) queue apart
/// and go first. While two or more connections are active, the oldest active one is the *express
/// connection*: it takes express requests only, so that a single never sits behind a broadcast's
/// thousand streams in one connection's order (a server reads a connection's frames in order: a busy
/// one answers the stream written last after all the others). Other connections take express requests
/// only when the express connection has no free stream. With one connection active it takes
/// everything; a pool's demand for bulk work counts the express connection's room only then, so the
/// pool opens the connections bulk work needs as before.
package struct ConnectionPoolStateMachine<Request: PoolableRequest>: Sendable {
    package typealias ConnectionID = Int

    package struct Configuration: Sendable, Hashable {
        /// The most connections the pool opens (the C pushd never capped this; we do).
        package var maximumConnections: Int
        /// First reconnect delay after a failure, doubled per failure, capped, with full jitter.
        package var reconnectBaseDelay: TimeAmount
        package var reconnectMaximumDelay: TimeAmount
        /// The most requests waiting for a connection. Beyond it, `submit` fails the excess at once
        /// (`queueFull`: the caller keeps them and tries again later) instead of queueing without limit.
        package var maximumQueued: Int

        package init(
            maximumConnections: Int = 4,
            reconnectBaseDelay: TimeAmount = .milliseconds(100),
            reconnectMaximumDelay: TimeAmount = .seconds(30),
            maximumQueued: Int = 100_000
        ) {
            precondition(maximumConnections >= 1)
            precondition(maximumQueued >= 1)
            self.maximumQueued = maximumQueued
            self.maximumConnections = maximumConnections
            self.reconnectBaseDelay = reconnectBaseDelay
            self.reconnectMaximumDelay = reconnectMaximumDelay
        }
    }

    enum ConnectionState: Sendable, Hashable {
        case connecting
        /// `capacity`: streams the connection may have open; `leased`: requests it holds.
        case active(capacity: Int, leased: Int, parked: Bool)
        /// GOAWAY, shutdown or a fatal answer: it finishes what it holds but takes nothing new.
        case retiring
    }

    package struct Actions: Sendable {
        /// Wake these parked connections: they have free streams and there is queued work.
        package var wake: [ConnectionID] = []
        /// Open a connection with this id now.
        package var connect: ConnectionID?
        /// Open a connection with this id after the delay (back-off after failures).
        package var connectAfter: (id: ConnectionID, delay: TimeAmount)?
        /// Fail these requests (deadline passed, pool shut down).
        package var fail: [(Request, FailureReason)] = []
        /// Close these connections (shutdown).
        package var close: [ConnectionID] = []

        package var isEmpty: Bool {
            wake.isEmpty && connect == nil && connectAfter == nil && fail.isEmpty && close.isEmpty
        }
    }

    package enum FailureReason: Sendable, Hashable {
        case deadlineExceeded
        case shutdown
        /// The queue was at `maximumQueued`.
        case queueFull
        /// Every connection attempt failed; the last error, safe to log.
        case connectFailed(String)
    }

    enum LifecycleState: Sendable, Hashable {
        case running
        case shuttingDown
    }

    private let configuration: Configuration
    private var connections: [ConnectionID: ConnectionState] = [:]
    private var queue: Deque<Request> = []
    /// Express requests, waiting in order, taken before ``queue``.
    private var expressQueue: Deque<Request> = []
    private var nextConnectionID: ConnectionID = 0
    private var consecutiveFailures = 0
    private var lastConnectError: String?
    /// A reconnect is scheduled (back-off): do not open another one meanwhile.
    private var reconnectScheduled = false
    /// Connections still connecting with credentials that were replaced since (``credentialsRenewed()``):
    /// closed as soon as they are established, and not counted as on their way for queued work.
    private var staleConnecting: Set<ConnectionID> = []
    private var lifecycle: LifecycleState = .running
    private var random: SplitMix64
    /// No queued request expires before this (a lower bound: ticks before it look at nothing).
    package private(set) var earliestQueuedDeadline: NIODeadline = .distantFuture

    package init(configuration: Configuration, seed: UInt64 = 0x5eed) {
        self.configuration = configuration
        self.random = SplitMix64(seed: seed)
    }

    package var queuedCount: Int { queue.count + expressQueue.count }
    package var connectionCount: Int { connections.count }
    package var activeConnectionCount: Int {
        connections.values.filter { if case .active = $0 { true } else { false } }.count
    }
    package var leasedCount: Int {
        connections.values.reduce(0) { sum, state in
            if case .active(_, let leased, _) = state { return sum + leased }
            return sum
        }
    }

    // MARK: Requests

    /// A new request (or a batch): queue it and decide who sends it.
    package mutating func submit(_ requests: some Sequence<Request>) -> Actions {
        guard lifecycle == .running else {
            var actions = Actions()
            actions.fail = requests.map { ($0, .shutdown) }
            return actions
        }
        var actions = Actions()
        for request in requests {
            if queuedCount >= configuration.maximumQueued {
                actions.fail.append((request, .queueFull))
            } else {
                if request.isExpress { expressQueue.append(request) } else { queue.append(request) }
                earliestQueuedDeadline = min(earliestQueuedDeadline, request.deadline)
            }
        }
        let dispatched = dispatchQueuedWork()
        guard !actions.fail.isEmpty else { return dispatched }
        actions.wake = dispatched.wake
        actions.connect = dispatched.connect
        actions.connectAfter = dispatched.connectAfter
        return actions
    }

    /// Requests that were taken by a connection but never processed by the server (GOAWAY above the last
    /// stream id, REFUSED_STREAM, never written): back to the head of the queue.
    package mutating func requeue(_ requests: [Request]) -> Actions {
        guard lifecycle == .running else {
            var actions = Actions()
            actions.fail = requests.map { ($0, .shutdown) }
            return actions
        }
        for request in requests.reversed() {
            if request.isExpress { expressQueue.prepend(request) } else { queue.prepend(request) }
            earliestQueuedDeadline = min(earliestQueuedDeadline, request.deadline)
        }
        return dispatchQueuedWork()
    }

    /// A connection finished `released` requests and asks for up to `maximum` more. Returns the
    /// requests it now holds; an empty answer parks it until new work arrives.
    package mutating func pull(
        connection id: ConnectionID,
        released: Int,
        maximum: Int
    ) -> (
        requests: [Request], actions: Actions
    ) {
        guard case .active(let capacity, var leased, _) = connections[id] else {
            return ([], Actions())
        }
        leased = max(0, leased - released)
        connections[id] = .active(capacity: capacity, leased: leased, parked: false)
        let room = lifecycle == .running ? min(max(0, capacity - leased), maximum) : 0
        let lanes = lanes(for: id)
        var taken: [Request] = []
        if lanes.express {
            let count = min(room, expressQueue.count)
            taken.reserveCapacity(count)
            for _ in 0..<count { taken.append(expressQueue.removeFirst()) }
        }
        if lanes.bulk {
            let count = min(room - taken.count, queue.count)
            if count > 0 {
                taken.reserveCapacity(taken.count + count)
                for _ in 0..<count { taken.append(queue.removeFirst()) }
            }
        }
        leased += taken.count
        connections[id] = .active(capacity: capacity, leased: leased, parked: taken.isEmpty)
        var actions = Actions()
        if queuedCount > 0 { actions = dispatchQueuedWork() }
        return (taken, actions)
    }

    /// Removes a queued request (the caller cancelled it). Returns it if it was still queued; if
    /// not, a connection holds it and must be told.
    package mutating func cancelQueued(requestID: UInt64) -> Request? {
        if let index = expressQueue.firstIndex(where: { $0.poolRequestID == requestID }) {
            return expressQueue.remove(at: index)
        }
        guard let index = queue.firstIndex(where: { $0.poolRequestID == requestID }) else { return nil }
        return queue.remove(at: index)
    }

    /// Removes every still-queued request among `requestIDs` (never written to a connection, so
    /// the server never saw them) and returns them. Requests already on a connection are left alone.
    package mutating func withdrawQueued(requestIDs: Set<UInt64>) -> [Request] {
        guard queuedCount > 0, !requestIDs.isEmpty else { return [] }
        var withdrawn: [Request] = []
        for lane in [\Self.expressQueue, \Self.queue] where !self[keyPath: lane].isEmpty {
            var kept = Deque<Request>()
            kept.reserveCapacity(self[keyPath: lane].count)
            for request in self[keyPath: lane] {
                if requestIDs.contains(request.poolRequestID) {
                    withdrawn.append(request)
                } else {
                    kept.append(request)
                }
            }
            self[keyPath: lane] = kept
        }
        return withdrawn
    }

    // MARK: Connections

    package mutating func connectionEstablished(_ id: ConnectionID, availableStreams: Int) -> Actions {
        guard case .connecting = connections[id] else { return Actions() }
        consecutiveFailures = 0
        lastConnectError = nil
        connections[id] = .active(capacity: availableStreams, leased: 0, parked: true)
        if staleConnecting.remove(id) != nil {
            // Made with the credentials a renewal replaced: it takes nothing and closes.
            connections[id] = .retiring
            var actions = dispatchQueuedWork()
            actions.close.append(id)
            return actions
        }
        if lifecycle == .shuttingDown {
            var actions = Actions()
            connections[id] = .retiring
            actions.close = [id]
            return actions
        }
        return dispatchQueuedWork()
    }

    /// The server changed SETTINGS_MAX_CONCURRENT_STREAMS; `capacity` is the new total limit.
    package mutating func capacityChanged(_ id: ConnectionID, capacity: Int) -> Actions {
        guard case .active(_, let leased, let parked) = connections[id] else { return Actions() }
        connections[id] = .active(capacity: capacity, leased: leased, parked: parked)
        return dispatchQueuedWork()
    }

    /// The connection takes no new work (GOAWAY, fatal answer, idle close); it may still finish
    /// what it holds. Another connection may be opened for the queue.
    package mutating func connectionRetiring(_ id: ConnectionID) -> Actions {
        guard connections[id] != nil else { return Actions() }
        connections[id] = .retiring
        return dispatchQueuedWork()
    }

    package mutating func connectionFailed(_ id: ConnectionID, error: String) -> Actions {
        guard connections.removeValue(forKey: id) != nil else { return Actions() }
        if staleConnecting.remove(id) != nil {
            // Its credentials were replaced already: its failure says nothing about the new ones.
            return dispatchQueuedWork()
        }
        consecutiveFailures += 1
        lastConnectError = error
        guard lifecycle == .running, queuedCount > 0 else { return Actions() }
        if connections.isEmpty && !reconnectScheduled {
            reconnectScheduled = true
            var actions = Actions()
            actions.connectAfter = (makeConnectionID(), backoffDelay())
            return actions
        }
        return dispatchQueuedWork()
    }

    /// The connection's channel closed (after it reported its own streams' fate).
    package mutating func connectionClosed(_ id: ConnectionID) -> Actions {
        guard connections.removeValue(forKey: id) != nil else { return Actions() }
        staleConnecting.remove(id)
        return dispatchQueuedWork()
    }

    /// The pool's credentials were replaced (a reload): every open connection takes nothing new, finishes
    /// what it holds and closes; those still connecting close once established; queued work opens new
    /// connections, made with the new credentials, at once (a back-off earned by the old ones is forgotten).
    package mutating func credentialsRenewed() -> Actions {
        guard lifecycle == .running else { return Actions() }
        var retired: [ConnectionID] = []
        for (id, state) in connections.sorted(by: { $0.key < $1.key }) {
            switch state {
            case .connecting:
                staleConnecting.insert(id)
            case .active:
                connections[id] = .retiring
                retired.append(id)
            case .retiring:
                continue
            }
        }
        consecutiveFailures = 0
        lastConnectError = nil
        reconnectScheduled = false
        var actions = dispatchQueuedWork()
        actions.close = retired
        return actions
    }

    /// Another pool sharing a cap on connections with this one needs a slot (Web Push: one pool per origin,
    /// a cap over all): retire one connection that holds no request, the oldest, so that it closes. Nothing
    /// when every connection has work, or while shutting down.
    package mutating func idleConnectionWanted() -> Actions {
        var actions = Actions()
        guard lifecycle == .running else { return actions }
        for (id, state) in connections.sorted(by: { $0.key < $1.key }) {
            guard case .active(_, 0, _) = state else { continue }
            connections[id] = .retiring
            actions.close = [id]
            return actions
        }
        return actions
    }

    /// The back-off delay passed: the scheduled connection may be opened now.
    package mutating func reconnectDelayElapsed(_ id: ConnectionID) -> Actions {
        reconnectScheduled = false
        guard lifecycle == .running else { return Actions() }
        guard queuedCount > 0, connections.count < configuration.maximumConnections else { return Actions() }
        connections[id] = .connecting
        var actions = Actions()
        actions.connect = id
        return actions
    }

    /// The periodic check: fails queued requests whose deadline passed.
    package mutating func tick(now: NIODeadline) -> Actions {
        var actions = Actions()
        // Most ticks find nothing expired and look at nothing: only the earliest deadline is compared.
        guard earliestQueuedDeadline <= now else { return actions }
        var earliest = NIODeadline.distantFuture
        let connectFailed = connections.isEmpty && consecutiveFailures > 0
        for lane in [\Self.expressQueue, \Self.queue] {
            var kept = Deque<Request>()
            kept.reserveCapacity(self[keyPath: lane].count)
            for request in self[keyPath: lane] {
                if request.deadline <= now {
                    actions.fail.append(
                        (request, connectFailed ? .connectFailed(lastConnectError ?? "unknown") : .deadlineExceeded)
                    )
                } else {
                    kept.append(request)
                    earliest = min(earliest, request.deadline)
                }
            }
            self[keyPath: lane] = kept
        }
        earliestQueuedDeadline = earliest
        return actions
    }

    /// Stop: fail what is queued, retire every connection (each finishes its open streams).
    package mutating func shutdown() -> Actions {
        var actions = Actions()
        lifecycle = .shuttingDown
        actions.fail = (expressQueue + queue).map { ($0, .shutdown) }
        expressQueue.removeAll()
        queue.removeAll()
        for (id, state) in connections {
            if case .retiring = state { continue }
            connections[id] = .retiring
            actions.close.append(id)
        }
        return actions
    }

    // MARK: Decisions

    /// Wake parked connections with room, and open another connection when every usable one is full.
    private mutating func dispatchQueuedWork() -> Actions {
        var actions = Actions()
        guard lifecycle == .running, queuedCount > 0 else { return actions }
        var demand = queue.count
        var expressDemand = expressQueue.count
        var anyConnecting = false
        let express = expressConnection
        // The express connection first: it is the one express requests wait for.
        let ordered = connections.sorted { ($0.key == express ? -1 : $0.key) < ($1.key == express ? -1 : $1.key) }
        for (id, state) in ordered {
            switch state {
            case .connecting:
                if !staleConnecting.contains(id) { anyConnecting = true }
            case .active(let capacity, let leased, let parked):
                var room = capacity - leased
                guard room > 0 else { continue }
                let lanes = lanes(for: id)
                let wanted =
                    (lanes.express ? expressDemand : 0) + (lanes.bulk ? demand : 0)
                if parked, wanted > 0 {
                    connections[id] = .active(capacity: capacity, leased: leased, parked: false)
                    actions.wake.append(id)
                }
                if lanes.express {
                    let taken = min(room, expressDemand)
                    expressDemand -= taken
                    room -= taken
                }
                if lanes.bulk { demand -= room }
            case .retiring:
                continue
            }
        }
        demand += max(0, expressDemand)
        // Every usable connection is full (or there is none) and work is left: open one more,
        // unless one is already on its way or a back-off is running.
        if demand > 0, !anyConnecting, !reconnectScheduled, connections.count < configuration.maximumConnections {
            if consecutiveFailures > 0 {
                reconnectScheduled = true
                actions.connectAfter = (makeConnectionID(), backoffDelay())
            } else {
                let id = makeConnectionID()
                connections[id] = .connecting
                actions.connect = id
            }
        }
        return actions
    }

    /// The express connection: the oldest active one, while two or more are active; nil otherwise.
    private var expressConnection: ConnectionID? {
        var active: [ConnectionID] = []
        for (id, state) in connections {
            if case .active = state { active.append(id) }
        }
        return active.count >= 2 ? active.min() : nil
    }

    /// What connection `id` takes: the express connection express requests only; the others bulk work,
    /// and express requests only while the express connection has no free stream.
    private func lanes(for id: ConnectionID) -> (express: Bool, bulk: Bool) {
        guard let express = expressConnection else { return (true, true) }
        if id == express { return (true, false) }
        guard case .active(let capacity, let leased, _) = connections[express] else { return (true, true) }
        return (leased >= capacity, true)
    }

    private mutating func makeConnectionID() -> ConnectionID {
        defer { nextConnectionID += 1 }
        return nextConnectionID
    }

    /// Exponential back-off with full jitter: uniform in [0, min(cap, base * 2^(failures-1))].
    private mutating func backoffDelay() -> TimeAmount {
        let exponent = min(max(consecutiveFailures - 1, 0), 20)
        let ceiling = min(
            configuration.reconnectMaximumDelay.nanoseconds,
            configuration.reconnectBaseDelay.nanoseconds &* (Int64(1) << Int64(exponent))
        )
        guard ceiling > 0 else { return .zero }
        return .nanoseconds(Int64(random.next() % UInt64(ceiling + 1)))
    }
}

/// A tiny deterministic generator so back-off jitter is reproducible in tests.
struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
