import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// A raw TLS client for the legacy ports, for tests and diagnostics: writes bytes exactly as given and
/// collects whatever the server sends until it closes. It knows nothing of the formats, so a test can
/// send anything, malformed bytes included.
public final class LegacyGatewayProbe: Sendable {
    private let channel: any Channel
    private let collector: Collector
    private let group: MultiThreadedEventLoopGroup

    private init(channel: any Channel, collector: Collector, group: MultiThreadedEventLoopGroup) {
        self.channel = channel
        self.collector = collector
        self.group = group
    }

    /// Connects to `host:port` over TLS, trusting `trustRootsPEM`, presenting the client certificate when given.
    public static func connect(
        host: String = "127.0.0.1",
        port: Int,
        trustRootsPEM: String?,
        clientCertificatePEM: String? = nil,
        clientPrivateKeyPEM: String? = nil
    ) async throws -> LegacyGatewayProbe {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let trustRootsPEM {
            tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(trustRootsPEM.utf8)))
        }
        if let clientCertificatePEM, let clientPrivateKeyPEM {
            tls.certificateChain = try NIOSSLCertificate.fromPEMBytes(Array(clientCertificatePEM.utf8)).map {
                .certificate($0)
            }
            tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(clientPrivateKeyPEM.utf8), format: .pem))
        }
        let context = try NIOSSLContext(configuration: tls)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let collector = Collector()
        do {
            let channel = try await ClientBootstrap(group: group)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(
                            try NIOSSLClientHandler(context: context, serverHostname: nil)
                        )
                        try channel.pipeline.syncOperations.addHandler(CollectingHandler(collector: collector))
                    }
                }
                .connect(host: host, port: port)
                .get()
            return LegacyGatewayProbe(channel: channel, collector: collector, group: group)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// Writes and flushes `bytes`.
    public func send(_ bytes: [UInt8]) async throws {
        try await channel.writeAndFlush(ByteBuffer(bytes: bytes)).get()
    }

    /// Waits until the server closes the connection (or `timeout` passes, then closes it) and returns
    /// every byte it sent.
    public func receiveUntilClosed(timeout: Duration = .seconds(30)) async throws -> [UInt8] {
        let channel = self.channel
        let cutOff = channel.eventLoop.scheduleTask(in: TimeAmount(timeout)) { channel.close(promise: nil) }
        try? await channel.closeFuture.get()
        cutOff.cancel()
        return collector.bytes
    }

    /// What arrived so far.
    public var received: [UInt8] { collector.bytes }

    public var isOpen: Bool { channel.isActive }

    public func close() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }

    private final class Collector: Sendable {
        private let storage = Mutex<[UInt8]>([])
        func append(_ buffer: ByteBuffer) { storage.withLock { $0.append(contentsOf: buffer.readableBytesView) } }
        var bytes: [UInt8] { storage.withLock { $0 } }
    }

    private final class CollectingHandler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let collector: Collector
        init(collector: Collector) { self.collector = collector }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            collector.append(unwrapInboundIn(data))
        }
        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
