import Logging
package import NIOCore
package import PushTransport
package import PushgateCore

/// A request inside the HTTP/2 pool: the caller's request plus the pool's bookkeeping.
package struct PooledRequest: TransportPooledRequest {
    package var request: APNsRequest
    package let poolRequestID: UInt64
    package let deadline: NIODeadline
    /// Times it was written to a connection without APNs processing it (resent transparently).
    package var resends: Int = 0
    /// Whether it was already resent once after `ExpiredProviderToken`.
    var retriedAfterExpiredToken = false
    /// Whether it was already resent once after a connection-fatal answer (`Shutdown`, `IdleTimeout`...).
    var retriedAfterConnectionFatal = false

    package init(request: APNsRequest, poolRequestID: UInt64, deadline: NIODeadline) {
        self.request = request
        self.poolRequestID = poolRequestID
        self.deadline = deadline
    }
}

/// APNs over HTTP/2 as a plug-in of the transport layer: it owns the connection handler (frames,
/// HPACK, streams), provider tokens and the client's metrics; the pool, TLS and bootstrap are shared.
package struct APNsHTTP2Plugin: TransportPlugin {
    package typealias Request = PooledRequest

    var connection: APNsConnectionStateMachine.Configuration
    /// `:authority` of every request.
    var authority: String
    var tickInterval: TimeAmount
    var requestsPerSecondPerConnection: Int?
    var tokenSource: (any APNsProviderTokenSource)?
    var metrics: APNsClientMetrics
    var logger: Logger

    package var serviceName: String { "APNs" }

    package func makeConnection(
        id: Int,
        pool: ConnectionPool<Self>,
        channel: any Channel
    ) throws -> APNsConnectionHandler {
        let handler = APNsConnectionHandler(
            connectionID: id,
            delegate: pool,
            configuration: .init(
                connection: connection,
                authority: authority,
                tickInterval: tickInterval,
                requestsPerSecond: requestsPerSecondPerConnection,
                logger: logger
            ),
            now: channel.eventLoop.now
        )
        try channel.pipeline.syncOperations.addHandler(handler)
        return handler
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
