import Logging
package import NIOCore
package import PushTransport
package import PushgateCore

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
    var tokenSource: (any APNsProviderTokenSource)?
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

extension ConnectionPool: APNsConnectionDelegate where Plugin == APNsHTTP2Plugin {
    package func providerToken() throws -> ProviderToken? {
        guard let token = try plugin.tokenSource?.providerToken() else { return nil }
        plugin.metrics.providerTokenHandedOut(token)
        return token
    }

    package func providerTokenRejectedAsExpired(_ token: ProviderToken) {
        plugin.metrics.providerTokensRejected.increment()
        plugin.tokenSource?.providerTokenRejectedAsExpired(token)
    }

    package func streamAnswered(roundTrip: TimeAmount) {
        plugin.metrics.streamAnswered(roundTrip: roundTrip)
    }
}
