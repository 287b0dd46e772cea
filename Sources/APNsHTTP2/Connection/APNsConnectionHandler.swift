import APNsTransport
import Logging
package import NIOCore
package import PushTransport
package import PushgateCore

/// The APNs connection's channel handler: the transport layer's HTTP/2 push connection with the APNs
/// exchange, declared here so that NIO's calls run code specialised for APNs (``HTTP2PushChannelHandler``).
package final class APNsConnectionHandler: HTTP2PushChannelHandler {
    package typealias InboundIn = ByteBuffer
    package typealias OutboundOut = ByteBuffer

    package let connection: HTTP2PushConnectionHandler<APNsExchange>

    package init(_ connection: HTTP2PushConnectionHandler<APNsExchange>) {
        self.connection = connection
    }

    /// - Parameter exchangeDelegate: where this connection's provider tokens come from, when not from
    ///   `delegate` (the pool pins each connection to the credentials it was made with).
    init<Delegate: APNsConnectionDelegate>(
        connectionID: Int,
        delegate: Delegate,
        exchangeDelegate: (any APNsExchangeDelegate)? = nil,
        configuration: APNsConnectionConfiguration,
        now: NIODeadline
    ) {
        let pool: any HTTP2PushConnectionDelegate<PooledRequest> = delegate
        connection = HTTP2PushConnectionHandler(
            connectionID: connectionID,
            delegate: pool,
            exchange: APNsExchange(authority: configuration.authority, delegate: exchangeDelegate ?? delegate),
            configuration: .init(
                connection: configuration.connection,
                tickInterval: configuration.tickInterval,
                answerTimeout: configuration.answerTimeout,
                requestsPerSecond: configuration.requestsPerSecond,
                logger: configuration.logger
            ),
            now: now
        )
    }

    // The hot entry points, specialised here (see ``HTTP2PushChannelHandler``).

    package func handlerAdded(context: ChannelHandlerContext) { connection.handlerAdded(context: context) }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        connection.channelRead(context: context, bytes: unwrapInboundIn(data))
    }

    package func channelReadComplete(context: ChannelHandlerContext) {
        connection.channelReadComplete(context: context)
    }

    package func wake() { connection.wake() }
}

/// What an APNs connection handler needs from its pool: the pool's part (ready, pull, requeue...) and
/// the provider tokens and metrics of the APNs exchange. The pool implements it; tests can too.
package protocol APNsConnectionDelegate: HTTP2PushConnectionDelegate<PooledRequest>, APNsExchangeDelegate {}

/// What the APNs exchange of one connection needs: its provider tokens and the latency histogram.
package protocol APNsExchangeDelegate: AnyObject, Sendable {
    /// The bearer token for new requests (token auth), or nil for certificate connections.
    func providerToken() throws -> ProviderToken?
    func providerTokenRejectedAsExpired(_ token: ProviderToken)
    /// An answer arrived `roundTrip` after its request was written (for the latency histogram).
    func streamAnswered(roundTrip: TimeAmount)
}

/// How an APNs connection is set up.
struct APNsConnectionConfiguration {
    var connection: APNsConnectionStateMachine.Configuration
    /// `:authority`
    var authority: String
    /// How often deadlines, pings and idleness are checked.
    var tickInterval: TimeAmount = .milliseconds(100)
    /// How long a written request waits for its answer at least (``HTTP2PushConnectionHandler/Configuration/answerTimeout``).
    var answerTimeout: TimeAmount? = nil
    /// The C pushd's `-r`: at most this many new requests per second on this connection (nil: no limit).
    var requestsPerSecond: Int? = nil
    var logger: Logger
}
