public import APNsSimulator
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A Firebase Cloud Messaging (HTTP v1) stand-in on loopback, written from Google's documentation:
///
/// - `POST /token`: the JWT-bearer grant. The assertion's RS256 signature is checked against the
///   service account's public key, and its claims (iss, scope, aud, iat/exp); the answer is an access
///   token with `expires_in`.
/// - `POST /v1/projects/{project}/messages:send`: bearer token (401 UNAUTHENTICATED when missing or
///   expired), faults on demand, message rules (one target, string data values, payload size, ttl),
///   device states; `{"name": "projects/P/messages/ID"}` and a record of what was accepted.
/// - a control API (JSON over HTTP/1.1 on its own port), see `FCMSimulatorCore.control`.
///
/// TLS with a fresh CA (the APNs simulator's certificate authority, the only thing shared with it);
/// ALPN offers `h2` and `http/1.1`, so OAuth libraries that speak HTTP/1.1 reach the token endpoint.
/// It imports nothing of the gateway's own FCM code, so the two cannot share a bug.
public struct FCMSimulator: LoopbackSimulator {
    public let setup: SimulatorSetup<Configuration, RunningFCMSimulator>

    public init(setup: SimulatorSetup<Configuration, RunningFCMSimulator>) {
        self.setup = setup
    }

    /// Starts a simulator, runs `body` with it, and stops it (listeners, threads, the CA file).
    @discardableResult
    public static func withRunning<Result: Sendable>(
        _ configuration: Configuration = .init(),
        _ body: (RunningFCMSimulator) async throws -> Result
    ) async throws -> Result {
        let authority = try SimulatorCertificateAuthority(commonName: "pushgate FCM simulator CA")
        let issued = try authority.issueServerCertificate()
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [
                .certificate(try NIOSSLCertificate(bytes: Array(issued.certificatePEM.utf8), format: .pem))
            ],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(issued.privateKeyPEM.utf8), format: .pem))
        )
        tls.applicationProtocols = ["h2", "http/1.1"]
        let sslContext = try NIOSSLContext(configuration: tls)
        let caPath = FileManager.default.temporaryDirectory
            .appendingPathComponent("pushgate-fcm-simulator-ca-\(UUID().uuidString).pem").path
        try authority.writeCertificate(to: caPath)
        defer {
            try? FileManager.default.removeItem(atPath: caPath)
            configuration.logger.info("FCM simulator stopped")
        }

        let certificates = (authority: authority, path: caPath)
        return try await SimulatorListeners.withRunning(
            threads: configuration.eventLoopThreads,
            start: { try await start(configuration, sslContext: sslContext, ca: certificates, listeners: $0) },
            body
        )
    }

    private static func start(
        _ configuration: Configuration,
        sslContext: NIOSSLContext,
        ca: (authority: SimulatorCertificateAuthority, path: String),
        listeners: SimulatorListeners
    ) async throws -> RunningFCMSimulator {
        let core = FCMSimulatorCore(configuration: configuration)
        let server = listeners.keep(
            try await bindServer(configuration, core: core, sslContext: sslContext, group: listeners.group)
        )
        let port = server.localAddress?.port ?? configuration.port
        let controlPort = try await listeners.bindControl(host: configuration.host, port: configuration.controlPort) {
            FCMHTTPHandler(route: { core.control($0) })
        }
        let running = RunningFCMSimulator(
            host: configuration.host,
            port: port,
            controlPort: controlPort,
            caCertificatePEM: ca.authority.certificatePEM,
            caCertificatePath: ca.path,
            core: core
        )
        core.state.withLock { $0.tokenURI = running.tokenURI }
        configuration.logger.info(
            "FCM simulator listening",
            metadata: [
                "fcm.simulator.port": "\(port)",
                "fcm.simulator.control_port": "\(controlPort.map(String.init) ?? "off")",
            ]
        )
        return running
    }

    private static func bindServer(
        _ configuration: Configuration,
        core: FCMSimulatorCore,
        sslContext: NIOSSLContext,
        group: MultiThreadedEventLoopGroup
    ) async throws -> any Channel {
        let route: @Sendable (FCMSimulatorRequest) -> FCMSimulatorResponse = { core.route($0) }
        let latency: @Sendable () -> Int = { core.latencyMilliseconds }
        return try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                }.flatMap {
                    channel.configureHTTP2SecureUpgrade(
                        h2ChannelConfigurator: { channel in
                            channel.configureHTTP2Pipeline(
                                mode: .server,
                                initialLocalSettings: [
                                    HTTP2Setting(
                                        parameter: .maxConcurrentStreams,
                                        value: configuration.maximumConcurrentStreams
                                    )
                                ]
                            ) { stream in
                                stream.eventLoop.makeCompletedFuture {
                                    let sync = stream.pipeline.syncOperations
                                    try sync.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
                                    try sync.addHandler(FCMHTTPHandler(route: route, latencyMilliseconds: latency))
                                }
                            }.map { _ in }
                        },
                        http1ChannelConfigurator: { channel in
                            channel.eventLoop.makeCompletedFuture {
                                let sync = channel.pipeline.syncOperations
                                try sync.configureHTTPServerPipeline(withErrorHandling: true)
                                try sync.addHandler(FCMHTTPHandler(route: route, latencyMilliseconds: latency))
                            }
                        }
                    )
                }
            }
            .bind(host: configuration.host, port: configuration.port)
            .get()
    }
}

extension FCMSimulator.Configuration: SimulatorConfiguration {}
