public import APNsSimulator
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A Web Push service stand-in on loopback (RFC 8030, 8291, 8292), written from the RFCs:
///
/// - several origins, each a TLS listener of its own (`https://127.0.0.1:PORT`), offering HTTP/2 and
///   HTTP/1.1 by ALPN, or HTTP/1.1 only;
/// - it makes subscriptions as a browser would (a P-256 key pair and an auth secret each) and hands out
///   their `PushSubscription` JSON;
/// - `POST /push/{id}` verifies VAPID (ES256 signature with `k`, `aud` = the origin, `exp` in the next
///   24 hours), `TTL`, `Urgency`, `Topic`, the content coding and size, and decrypts the message with
///   the subscription's private key; 201 and a log of what each subscription received;
/// - scripted answers (404/410/413/429 with Retry-After/5xx, latency, dropped connections) per
///   subscription or origin, and a control API (JSON over HTTP/1.1 on its own port).
///
/// It imports nothing of the gateway's own Web Push code (module WebPush), so the two cannot share a
/// bug; it borrows the APNs simulator's test CA and listener scaffold only.
public struct WebPushSimulator: LoopbackSimulator {
    public let setup: SimulatorSetup<Configuration, RunningWebPushSimulator>

    public init(setup: SimulatorSetup<Configuration, RunningWebPushSimulator>) {
        self.setup = setup
    }

    /// Starts a simulator, runs `body` with it, and stops it (listeners, threads, the CA file).
    @discardableResult
    public static func withRunning<Result: Sendable>(
        _ configuration: Configuration = .init(),
        _ body: (RunningWebPushSimulator) async throws -> Result
    ) async throws -> Result {
        guard !configuration.origins.isEmpty else {
            throw SimulatorError.invalidConfiguration(key: "origins", problem: "at least one origin is needed")
        }
        guard configuration.decryptEvery >= 1 else {
            throw SimulatorError.invalidConfiguration(key: "decryptEvery", problem: "must be at least 1")
        }
        let authority = try SimulatorCertificateAuthority(commonName: "pushgate Web Push simulator CA")
        let issued = try authority.issueServerCertificate()
        let certificate = try NIOSSLCertificate(bytes: Array(issued.certificatePEM.utf8), format: .pem)
        let key = try NIOSSLPrivateKey(bytes: Array(issued.privateKeyPEM.utf8), format: .pem)
        let contexts = try configuration.origins.map { origin in
            var tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: [.certificate(certificate)],
                privateKey: .privateKey(key)
            )
            tls.applicationProtocols = origin.offersHTTP2 ? ["h2", "http/1.1"] : ["http/1.1"]
            return try NIOSSLContext(configuration: tls)
        }
        let caPath = FileManager.default.temporaryDirectory
            .appendingPathComponent("pushgate-webpush-simulator-ca-\(UUID().uuidString).pem").path
        try authority.writeCertificate(to: caPath)
        defer {
            try? FileManager.default.removeItem(atPath: caPath)
            configuration.logger.info("Web Push simulator stopped")
        }
        let workers =
            configuration.workerThreads > 0 ? NIOThreadPool(numberOfThreads: configuration.workerThreads) : nil
        workers?.start()
        do {
            let result = try await SimulatorListeners.withRunning(
                threads: configuration.eventLoopThreads,
                start: { listeners in
                    try await start(
                        configuration,
                        contexts: contexts,
                        ca: (authority.certificatePEM, caPath),
                        listeners: listeners,
                        workers: workers
                    )
                },
                body
            )
            try? await workers?.shutdownGracefully()
            return result
        } catch {
            try? await workers?.shutdownGracefully()
            throw error
        }
    }

    private static func start(
        _ configuration: Configuration,
        contexts: [NIOSSLContext],
        ca: (pem: String, path: String),
        listeners: SimulatorListeners,
        workers: NIOThreadPool?
    ) async throws -> RunningWebPushSimulator {
        let core = WebPushSimulatorCore(configuration: configuration)
        var ports: [Int] = []
        for (index, origin) in configuration.origins.enumerated() {
            let server = listeners.keep(
                try await bindOrigin(
                    index: index,
                    origin: origin,
                    configuration: configuration,
                    core: core,
                    sslContext: contexts[index],
                    group: listeners.group,
                    workers: workers
                )
            )
            ports.append(server.localAddress?.port ?? origin.port)
        }
        let host = configuration.host
        core.state.withLock { $0.origins = ports.map { "https://\(host):\($0)" } }
        let controlPort = try await listeners.bindControl(host: configuration.host, port: configuration.controlPort) {
            WebPushSimulatorHTTPHandler(originIndex: -1, isHTTP2: false, route: { core.control($0) })
        }
        configuration.logger.info(
            "Web Push simulator listening",
            metadata: [
                "webpush.simulator.ports": "\(ports.map(String.init).joined(separator: ","))",
                "webpush.simulator.control_port": "\(controlPort.map(String.init) ?? "off")",
            ]
        )
        return RunningWebPushSimulator(
            host: configuration.host,
            ports: ports,
            controlPort: controlPort,
            caCertificatePEM: ca.pem,
            caCertificatePath: ca.path,
            core: core
        )
    }

    private static func bindOrigin(
        index: Int,
        origin: Configuration.Origin,
        configuration: Configuration,
        core: WebPushSimulatorCore,
        sslContext: NIOSSLContext,
        group: MultiThreadedEventLoopGroup,
        workers: NIOThreadPool?
    ) async throws -> any Channel {
        let route: @Sendable (WebPushSimulatorRequest) -> WebPushSimulatorResponse = { core.route($0) }
        let latency: @Sendable () -> Int = { core.latencyMilliseconds }
        let streams = configuration.maximumConcurrentStreams
        return try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        WebPushSimulatorConnectionCounter(originIndex: index, core: core)
                    )
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                }.flatMap {
                    channel.configureHTTP2SecureUpgrade(
                        h2ChannelConfigurator: { channel in
                            channel.configureHTTP2Pipeline(
                                mode: .server,
                                initialLocalSettings: [HTTP2Setting(parameter: .maxConcurrentStreams, value: streams)]
                            ) { stream in
                                stream.eventLoop.makeCompletedFuture {
                                    let sync = stream.pipeline.syncOperations
                                    try sync.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
                                    try sync.addHandler(
                                        WebPushSimulatorHTTPHandler(
                                            originIndex: index,
                                            isHTTP2: true,
                                            route: route,
                                            latencyMilliseconds: latency,
                                            workers: workers
                                        )
                                    )
                                }
                            }.map { _ in }
                        },
                        http1ChannelConfigurator: { channel in
                            channel.eventLoop.makeCompletedFuture {
                                let sync = channel.pipeline.syncOperations
                                try sync.configureHTTPServerPipeline(withErrorHandling: true)
                                try sync.addHandler(
                                    WebPushSimulatorHTTPHandler(
                                        originIndex: index,
                                        isHTTP2: false,
                                        route: route,
                                        latencyMilliseconds: latency,
                                        workers: workers
                                    )
                                )
                            }
                        }
                    )
                }
            }
            .bind(host: configuration.host, port: origin.port)
            .get()
    }
}

extension WebPushSimulator.Configuration: SimulatorConfiguration {}
