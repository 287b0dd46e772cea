public import Logging
public import NIOCore
public import ServiceLifecycle

/// A push client over the shared transport layer: one pool of connections for one set of credentials
/// and one endpoint. `APNsClient`, `FCMClient` and `LegacySender` are the three; what they have in
/// common is written here once, over their ``transportFront``.
///
/// The contract: `init` opens nothing (connections open on demand); `submit` never blocks and each
/// request's receiver is called exactly once; `withdraw` takes back what no connection has been given
/// yet; `run()` (a `Service`) keeps the client until graceful shutdown, then lets open work finish.
public protocol PushTransportClient: PushNotificationTransport, Service {
    associatedtype Configuration: Sendable

    /// - Parameters:
    ///   - eventLoopGroup: the loops to run on; nil: the client creates its own and shuts them down.
    ///   - logger: nil: the client's own label.
    init(configuration: Configuration, eventLoopGroup: (any EventLoopGroup)?, logger: Logger?) throws

    /// The pool, the event loops and the shutdown every client shares.
    var transportFront: TransportFront<Submission> { get }
}

extension PushTransportClient {
    /// Runs `body` with a client and shuts it down afterwards, whatever happens.
    public static func withClient<Result: Sendable>(
        configuration: Configuration,
        eventLoopGroup: (any EventLoopGroup)? = nil,
        logger: Logger? = nil,
        _ body: (Self) async throws -> Result
    ) async throws -> Result {
        let client = try Self(configuration: configuration, eventLoopGroup: eventLoopGroup, logger: logger)
        do {
            let result = try await body(client)
            await client.shutdown()
            return result
        } catch {
            await client.shutdown()
            throw error
        }
    }

    /// Queues requests; each outcome goes to its request's receiver exactly once. Never blocks. Beyond
    /// the configured queue limit, the excess is answered at once with `.failed(.queueFull)` (retryable).
    /// Returns ids usable with `cancel(_:)` and `withdraw(_:)`, one per request, in order.
    @discardableResult
    public func submit(_ requests: [Submission]) -> [UInt64] {
        transportFront.submit(requests)
    }

    /// Takes back the requests among `ids` that are still queued, i.e. not yet written to any
    /// connection, so the service has not seen them. Each completes with a `cancelled` outcome. Requests
    /// already on the wire are left to finish. For a graceful stop that leaves unsent work to the ledger.
    @discardableResult
    public func withdraw(_ ids: some Sequence<UInt64>) -> Int {
        transportFront.withdraw(ids)
    }

    /// Abandons a request: dequeued if still queued, its stream reset if in flight (a protocol without
    /// streams lets it finish). Its receiver gets a `cancelled` outcome unless its answer won the race.
    public func cancel(_ id: UInt64) {
        transportFront.cancel(id)
    }

    /// Requests worth having unanswered at once: the connections the client may open times what each
    /// may carry (the server's SETTINGS_MAX_CONCURRENT_STREAMS capped by configuration, or the legacy
    /// window; an assumed figure until a connection says). One atomic load.
    public var inFlightCapacity: Int { transportFront.inFlightCapacity }

    /// Queue length, connections (all, usable) and requests in flight: for metrics and tests.
    public var statistics: TransportStatistics { transportFront.statistics }

    /// Stops intake, fails queued requests with `shutdown`, lets in-flight work finish for up to the
    /// configured grace period, closes the connections.
    public func shutdown() async {
        await transportFront.shutdown()
    }

    /// Keeps the client until graceful shutdown (or cancellation), then shuts it down.
    public func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }
}
