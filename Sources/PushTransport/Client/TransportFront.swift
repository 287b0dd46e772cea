package import Logging
package import NIOCore
import NIOPosix
package import NIOSSL

/// The part every push client shares: its pool of connections, the event loops it may own, and an
/// orderly shutdown. `APNsClient`, `FCMClient` and `LegacySender` each hold one (their
/// ``PushTransportClient/transportFront``) and add only what is theirs: credentials, the one-shot
/// `send`, their plug-in. Opaque outside pushgate's targets.
public final class TransportFront<Submission: Sendable>: Sendable {
    private let pool: any TransportPoolDriver<Submission>
    private let ownedGroup: MultiThreadedEventLoopGroup?
    private let shutdownGracePeriod: TimeAmount
    private let dependents: [@Sendable () async -> Void]

    /// Builds the pool for `plugin` from the client's settings and starts its tick. Opens nothing:
    /// connections open on demand.
    /// - Parameter dependents: what the client adds that must stop after the pool and before the event
    ///   loops it owns (an access-token client), in order.
    package init<Settings: TransportClientSettings, Plugin: TransportPlugin>(
        settings: Settings,
        plugin: Plugin,
        loops: TransportEventLoops,
        logger: Logger,
        dependents: [@Sendable () async -> Void] = []
    ) throws where Plugin.Request.Submission == Submission {
        let pool = ConnectionPool(
            configuration: try .init(settings: settings),
            plugin: plugin,
            group: loops.group,
            logger: logger
        )
        pool.start()
        self.pool = pool
        self.ownedGroup = loops.owned
        self.shutdownGracePeriod = settings.shutdownGracePeriod.timeAmount
        self.dependents = dependents
    }

    /// Queues requests; returns the pool ids assigned to them, one per request, in order.
    package func submit(_ requests: [Submission]) -> [UInt64] {
        pool.submit(requests)
    }

    /// Takes back the requests among `ids` still queued; returns how many.
    package func withdraw(_ ids: some Sequence<UInt64>) -> Int {
        pool.withdraw(poolRequestIDs: Set(ids))
    }

    /// Abandons a request: dequeued if still queued, else its connection is asked to drop it.
    package func cancel(_ id: UInt64) {
        pool.cancel(poolRequestID: id)
    }

    package var inFlightCapacity: Int { pool.inFlightCapacity }

    /// New credentials: see ``ConnectionPool/renewConnections(tlsContext:_:)``. Returns how many open
    /// connections drain.
    @discardableResult
    package func renewConnections(tlsContext: NIOSSLContext?, _ change: () -> Void = {}) -> Int {
        pool.renewConnections(tlsContext: tlsContext, change)
    }

    /// False while the service cannot be reached: the last connection attempt failed and none succeeded since.
    package var isReachable: Bool { pool.reachability.isReachable }

    package var statistics: TransportStatistics {
        let (queued, connections, active, leased) = pool.statistics
        return .init(queued: queued, connections: connections, activeConnections: active, inFlight: leased)
    }

    /// Stops intake, fails what is queued with `shutdown`, lets connections finish what they hold for up
    /// to the grace period, closes them; then stops the dependents and the event loops it owns.
    package func shutdown() async {
        await pool.shutdown(grace: shutdownGracePeriod)
        for dependent in dependents { await dependent() }
        try? await ownedGroup?.shutdownGracefully()
    }
}

/// A transport's queue, connections and requests in flight: for metrics and tests.
public struct TransportStatistics: Sendable, Hashable {
    /// Waiting for a connection.
    public var queued: Int
    public var connections: Int
    /// Connections that take new work.
    public var activeConnections: Int
    /// Written (or being written) and not answered yet; for the legacy protocol, not yet confirmed.
    public var inFlight: Int

    package init(queued: Int, connections: Int, activeConnections: Int, inFlight: Int) {
        self.queued = queued
        self.connections = connections
        self.activeConnections = activeConnections
        self.inFlight = inFlight
    }
}

/// The event loops of a client: the caller's group, or one the client creates (and shuts down last).
package struct TransportEventLoops: Sendable {
    package let group: any EventLoopGroup
    let owned: MultiThreadedEventLoopGroup?

    package init(_ given: (any EventLoopGroup)?, threads: Int) {
        if let given {
            group = given
            owned = nil
        } else {
            let owned = MultiThreadedEventLoopGroup(numberOfThreads: threads)
            group = owned
            self.owned = owned
        }
    }

    /// Shuts down the group if the client created it (a client with several pools, Web Push's, owns
    /// the loops itself rather than through one ``TransportFront``).
    package func shutdownOwned() async {
        try? await owned?.shutdownGracefully()
    }
}

/// The pool as the front sees it, whatever its plug-in.
package protocol TransportPoolDriver<Submission>: AnyObject, Sendable {
    associatedtype Submission
    func submit(_ requests: [Submission]) -> [UInt64]
    func withdraw(poolRequestIDs: Set<UInt64>) -> Int
    func cancel(poolRequestID: UInt64)
    var inFlightCapacity: Int { get }
    var statistics: (queued: Int, connections: Int, active: Int, leased: Int) { get }
    var reachability: Reachability { get }
    func renewConnections(tlsContext: NIOSSLContext?, _ change: () -> Void) -> Int
    func shutdown(grace: TimeAmount) async
}

extension ConnectionPool: TransportPoolDriver {
    package typealias Submission = Plugin.Request.Submission
}
