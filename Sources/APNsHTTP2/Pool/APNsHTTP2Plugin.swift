package import APNsTransport
import Logging
package import NIOCore
package import PushTransport
package import PushgateCore
import Synchronization

/// A request inside the HTTP/2 pool: the caller's request plus the pool's bookkeeping.
package typealias PooledRequest = PoolEntry<APNsRequest, APNsResendMarks>

/// What the APNs plug-in remembers of a request's earlier attempts.
package struct APNsResendMarks: PoolEntryMarks {
    /// Whether it was already resent once after `ExpiredProviderToken`.
    package var retriedAfterExpiredToken = false
    /// Whether it was already resent once after a connection-fatal answer (`Shutdown`, `IdleTimeout`...).
    package var retriedAfterConnectionFatal = false

    package init() {}
}

/// APNs over HTTP/2 as a plug-in of the transport layer: it owns the connection handler (frames,
/// HPACK, streams), provider tokens and the client's metrics; the pool, TLS and bootstrap are shared.
package struct APNsHTTP2Plugin: TransportPlugin {
    package typealias Request = PooledRequest

    var connection: APNsConnectionStateMachine.Configuration
    /// `:authority` of every request.
    var authority: String
    var requestsPerSecondPerConnection: Int?
    /// The provider tokens of connections made from now on (nil inside: certificate authentication).
    let tokens: APNsTokenSlot
    var metrics: APNsClientMetrics

    package var serviceName: String { "APNs" }

    package func makeConnection(_ context: TransportConnectionContext<Self>) -> APNsConnectionHandler {
        let configuration = APNsConnectionConfiguration(
            connection: connection,
            authority: authority,
            tickInterval: context.tickInterval,
            answerTimeout: context.pool.configuration.requestTimeout,
            requestsPerSecond: requestsPerSecondPerConnection,
            logger: context.logger
        )
        return APNsConnectionHandler(
            connectionID: context.id,
            delegate: context.pool,
            // Pinned: a connection keeps the token source it was made with, so that after a reload the old
            // connections drain with the old key while new ones use the new key.
            exchangeDelegate: APNsConnectionTokens(pool: context.pool, source: tokens.current),
            configuration: configuration,
            now: context.now
        )
    }

    package func connectionOpened() { metrics.connectionsOpened.increment() }
    package func connectionFailed() { metrics.connectionFailures.increment() }

    package func sampled(queued: Int, inFlight: Int, connections: Int, activeConnections: Int) {
        metrics.sampled(
            queued: queued,
            streamsInUse: inFlight,
            connections: connections,
            activeConnections: activeConnections
        )
    }
}

extension ConnectionPool: APNsConnectionDelegate where Plugin == APNsHTTP2Plugin {}

extension ConnectionPool: APNsExchangeDelegate where Plugin == APNsHTTP2Plugin {
    package func providerToken() throws -> ProviderToken? {
        try APNsConnectionTokens(pool: self, source: plugin.tokens.current).providerToken()
    }

    package func providerTokenRejectedAsExpired(_ token: ProviderToken) {
        APNsConnectionTokens(pool: self, source: plugin.tokens.current).providerTokenRejectedAsExpired(token)
    }

    package func streamAnswered(roundTrip: TimeAmount) {
        plugin.metrics.streamAnswered(roundTrip: roundTrip)
    }
}

/// The provider-token source new connections of one client are made with; a reload replaces it
/// (``APNsClient/replaceAuthentication(_:)``), connections already made keep theirs.
final class APNsTokenSlot: Sendable {
    private let source: Mutex<(any APNsProviderTokenSource)?>

    init(_ source: (any APNsProviderTokenSource)?) {
        self.source = Mutex(source)
    }

    var current: (any APNsProviderTokenSource)? {
        get { source.withLock { $0 } }
        set { source.withLock { $0 = newValue } }
    }
}

/// One connection's provider tokens: the source it was made with, and the pool's token metrics.
final class APNsConnectionTokens: APNsExchangeDelegate {
    let pool: ConnectionPool<APNsHTTP2Plugin>
    let source: (any APNsProviderTokenSource)?

    init(pool: ConnectionPool<APNsHTTP2Plugin>, source: (any APNsProviderTokenSource)?) {
        self.pool = pool
        self.source = source
    }

    func providerToken() throws -> ProviderToken? {
        guard let token = try source?.providerToken() else { return nil }
        pool.plugin.metrics.providerTokenHandedOut(token)
        return token
    }

    func providerTokenRejectedAsExpired(_ token: ProviderToken) {
        pool.plugin.metrics.providerTokensRejected.increment()
        source?.providerTokenRejectedAsExpired(token)
    }

    func streamAnswered(roundTrip: TimeAmount) {
        pool.plugin.metrics.streamAnswered(roundTrip: roundTrip)
    }
}
