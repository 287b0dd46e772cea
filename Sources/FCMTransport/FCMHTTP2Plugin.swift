import Logging
import NIOCore
import PushTransport
import PushgateCore

/// FCM over HTTP/2 as a plug-in of the transport layer: the connection handler is the shared HTTP/2
/// push connection with the FCM exchange; the pool, TLS and bootstrap are shared too.
struct FCMHTTP2Plugin: TransportPlugin {
    typealias Request = FCMPooledRequest

    var connection: HTTP2ConnectionStateMachine.Configuration
    var headers: FCMRequestHeaders
    var bearer: FCMBearerCache
    var clock: any WallClock
    var tickInterval: TimeAmount
    var logger: Logger

    var serviceName: String { "FCM" }

    func makeConnection(
        id: Int,
        pool: ConnectionPool<Self>,
        channel: any Channel
    ) throws -> HTTP2PushConnectionHandler<FCMExchange> {
        let handler = HTTP2PushConnectionHandler(
            connectionID: id,
            delegate: pool,
            exchange: FCMExchange(headers: headers, bearer: bearer, clock: clock),
            configuration: .init(connection: connection, tickInterval: tickInterval, logger: logger),
            now: channel.eventLoop.now
        )
        try channel.pipeline.syncOperations.addHandler(handler)
        return handler
    }
}
