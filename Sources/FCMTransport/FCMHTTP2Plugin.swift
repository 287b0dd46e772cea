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

    var serviceName: String { "FCM" }

    func makeConnection(_ context: TransportConnectionContext<Self>) -> HTTP2PushConnectionHandler<FCMExchange> {
        HTTP2PushConnectionHandler(
            connectionID: context.id,
            delegate: context.pool,
            exchange: FCMExchange(headers: headers, bearer: bearer, clock: clock),
            configuration: .init(connection: connection, tickInterval: context.tickInterval, logger: context.logger),
            now: context.now
        )
    }
}
