import Logging
import NIOCore
import PushTransport
import PushgateCore

/// A request inside the HTTP/2 pool: the caller's request plus the pool's bookkeeping.
typealias PooledRequest = PoolEntry<APNsRequest, APNsResendMarks>

/// What the APNs plug-in remembers of a request's earlier attempts.
struct APNsResendMarks: PoolEntryMarks {
    /// Whether it was already resent once after `ExpiredProviderToken`.
    var retriedAfterExpiredToken = false
    /// Whether it was already resent once after a connection-fatal answer (`Shutdown`, `IdleTimeout`...).
    var retriedAfterConnectionFatal = false
}

/// APNs over HTTP/2 as a plug-in of the transport layer: it owns the connection handler (frames,
/// HPACK, streams), provider tokens and the client's metrics; the pool, TLS and bootstrap are shared.
struct APNsHTTP2Plugin: TransportPlugin {
    typealias Request = PooledRequest

    var connection: APNsConnectionStateMachine.Configuration
    /// `:authority` of every request.
    var authority: String
    var requestsPerSecondPerConnection: Int?
    var tokenSource: (any APNsProviderTokenSource)?
    var metrics: APNsClientMetrics

    var serviceName: String { "APNs" }

    func makeConnection(_ context: TransportConnectionContext<Self>) -> APNsConnectionHandler {
        let configuration = APNsConnectionConfiguration(
            connection: connection,
            authority: authority,
            tickInterval: context.tickInterval,
            requestsPerSecond: requestsPerSecondPerConnection,
            logger: context.logger
        )
        return APNsConnectionHandler(
            connectionID: context.id,
            delegate: context.pool,
            configuration: configuration,
            now: context.now
        )
    }

    func connectionOpened() { metrics.connectionsOpened.increment() }
    func connectionFailed() { metrics.connectionFailures.increment() }

    func sampled(queued: Int, inFlight: Int, connections: Int, activeConnections: Int) {
        metrics.sampled(
            queued: queued,
            streamsInUse: inFlight,
            connections: connections,
            activeConnections: activeConnections
        )
    }
}

extension ConnectionPool: APNsConnectionDelegate where Plugin == APNsHTTP2Plugin {
    func providerToken() throws -> ProviderToken? {
        guard let token = try plugin.tokenSource?.providerToken() else { return nil }
        plugin.metrics.providerTokenHandedOut(token)
        return token
    }

    func providerTokenRejectedAsExpired(_ token: ProviderToken) {
        plugin.metrics.providerTokensRejected.increment()
        plugin.tokenSource?.providerTokenRejectedAsExpired(token)
    }

    func streamAnswered(roundTrip: TimeAmount) {
        plugin.metrics.streamAnswered(roundTrip: roundTrip)
    }
}
