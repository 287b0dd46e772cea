import APNsTransport
import Logging
import NIOCore
import PushTransport
import PushgateCore

/// A request inside the legacy pool: the caller's request and how often it was sent again (with its
/// fate unknown, or after another's error).
typealias LegacyPooledRequest = PoolEntry<APNsRequest, NoMarks>

/// The legacy binary protocol as a plug-in of the transport layer: it owns the frame codec and the
/// connection handler; the pool, TLS and bootstrap are shared. A legacy connection's "streams" are its
/// window of unconfirmed notifications.
struct LegacyPlugin: TransportPlugin {
    typealias Request = LegacyPooledRequest

    var quietTime: TimeAmount
    var windowSize: Int

    var serviceName: String { "legacy gateway" }

    func addDecoders(to pipeline: ChannelPipeline.SynchronousOperations) throws {
        try pipeline.addHandler(ByteToMessageHandler(LegacyErrorResponseDecoder()))
    }

    func makeConnection(_ context: TransportConnectionContext<Self>) -> LegacyConnectionHandler {
        LegacyConnectionHandler(
            connectionID: context.id,
            delegate: context.pool,
            window: LegacyConnectionStateMachine(quietTime: quietTime),
            windowSize: windowSize,
            tickInterval: context.tickInterval,
            logger: context.logger
        )
    }
}

extension LegacyConnectionHandler: PooledConnection {}

extension ConnectionPool: LegacyConnectionDelegate where Plugin == LegacyPlugin {
    func connectionReady(_ id: Int) {
        connectionReady(id, capacity: plugin.windowSize)
    }

    func resend(_ requests: [LegacyPooledRequest]) {
        requeue(requests, because: .connectionLost)
    }
}
