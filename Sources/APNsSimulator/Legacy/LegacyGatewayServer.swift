import NIOCore
import NIOPosix
import NIOSSL

/// Binds the legacy gateway and feedback ports, when configured, with the HTTP/2 port's TLS context
/// (same server certificate, same client-certificate rules; a legacy client offers no ALPN).
enum LegacyGatewayServer {
    struct Bound {
        var channels: [any Channel] = []
        var gatewayPort: Int?
        var feedbackPort: Int?
    }

    static func bind(
        _ configuration: APNsSimulator.Configuration,
        core: LegacyGatewayCore,
        sslContext: NIOSSLContext,
        group: MultiThreadedEventLoopGroup
    ) async throws -> Bound {
        var bound = Bound()
        if let port = configuration.legacyPort {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        try sync.addHandler(NIOSSLServerHandler(context: sslContext))
                        try sync.addHandler(ByteToMessageHandler(LegacyGatewayParser()))
                        try sync.addHandler(LegacyGatewayHandler(core: core, connectionID: core.makeConnectionID()))
                    }
                }
                .bind(host: configuration.host, port: port)
                .get()
            bound.channels.append(channel)
            bound.gatewayPort = channel.localAddress?.port
        }
        if let port = configuration.feedbackPort {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        try sync.addHandler(NIOSSLServerHandler(context: sslContext))
                        try sync.addHandler(LegacyFeedbackHandler(core: core))
                    }
                }
                .bind(host: configuration.host, port: port)
                .get()
            bound.channels.append(channel)
            bound.feedbackPort = channel.localAddress?.port
        }
        return bound
    }
}
