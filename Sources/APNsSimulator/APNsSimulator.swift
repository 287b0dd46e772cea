import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// An APNs that runs on loopback: HTTP/2 over TLS (ALPN `h2`, or HTTP/2 with prior knowledge when
/// the client negotiates no ALPN), answering `POST /3/device/<token>` with Apple's statuses,
/// reasons and headers (`apns-id`, `apns-unique-id`), checking client certificates and provider
/// tokens, with device states, faults on demand, a recorder and a control API.
///
/// In process, scoped:
/// ```swift
/// try await APNsSimulator.withRunning(configuration) { simulator in
///     // connect to simulator.port trusting simulator.caCertificatePEM
///     let stats = simulator.stats()
/// }
/// ```
/// As a `Service` (for `ServiceGroup`), running until cancelled or shut down gracefully:
/// `APNsSimulator(configuration: configuration) { running in print(running.port) }`.
///
/// Validation follows Apple's documentation; see `APNsRequestValidator` for the checks, their
/// order and the reasons. The simulator deliberately shares no code with the gateway's client.
public struct APNsSimulator: LoopbackSimulator {
    public let setup: SimulatorSetup<Configuration, RunningAPNsSimulator>

    public init(setup: SimulatorSetup<Configuration, RunningAPNsSimulator>) {
        self.setup = setup
    }

    /// Starts a simulator, runs `body` with it, and stops it (listeners, connections, threads,
    /// the temporary CA file) when `body` returns or throws.
    @discardableResult
    public static func withRunning<Result: Sendable>(
        _ configuration: Configuration = .init(),
        _ body: (RunningAPNsSimulator) async throws -> Result
    ) async throws -> Result {
        try configuration.validate()
        let material = try TLSSetup.make(configuration)
        defer {
            material.removeTemporaryFiles()
            configuration.logger.info("APNs simulator stopped")
        }
        return try await SimulatorListeners.withRunning(
            threads: configuration.eventLoopThreads,
            start: { listeners in try await start(configuration, material: material, listeners: listeners) },
            dropConnections: { running in
                running.core.dropAllConnections()
                running.core.legacy.dropConnections()
            },
            body
        )
    }

    private static func start(
        _ configuration: Configuration,
        material: TLSSetup,
        listeners: SimulatorListeners
    ) async throws -> RunningAPNsSimulator {
        let core = SimulatorCore(
            handling: configuration.handling,
            tokenVerifier: ProviderTokenVerifier(keys: configuration.tokenKeys),
            clock: configuration.clock,
            recordLimit: configuration.recordLimit,
            tracksDevices: configuration.tracksDevices,
            hasClientCertificateAuthority: configuration.clientCertificateAuthorityPEM != nil,
            defaultMaxConcurrentStreams: configuration.maxConcurrentStreams,
            sendsUniqueID: configuration.environment == .development,
            faults: configuration.faults,
            seed: configuration.faultSeed,
            logger: configuration.logger
        )
        let server = listeners.keep(
            try await bindServer(configuration, core: core, sslContext: material.sslContext, group: listeners.group)
        )
        let api = ControlAPI(core: core)
        let controlPort = try await listeners.bindControl(host: configuration.host, port: configuration.controlPort) {
            ControlAPIHandler(api: api)
        }
        let legacyPorts = try await LegacyGatewayServer.bind(
            configuration,
            core: core.legacy,
            sslContext: material.sslContext,
            group: listeners.group
        )
        for channel in legacyPorts.channels { listeners.keep(channel) }
        let running = RunningAPNsSimulator(
            host: configuration.host,
            port: server.localAddress?.port ?? configuration.port,
            controlPort: controlPort,
            legacyPort: legacyPorts.gatewayPort,
            feedbackPort: legacyPorts.feedbackPort,
            caCertificatePEM: material.caCertificatePEM,
            caCertificatePath: material.caCertificatePath,
            certificateAuthority: material.authority,
            core: core
        )
        configuration.logger.info(
            "APNs simulator listening",
            metadata: [
                "apns.simulator.port": "\(running.port)",
                "apns.simulator.control_port": "\(controlPort.map(String.init) ?? "off")",
                "apns.simulator.legacy_port": "\(running.legacyPort.map(String.init) ?? "off")",
                "apns.simulator.feedback_port": "\(running.feedbackPort.map(String.init) ?? "off")",
            ]
        )
        return running
    }

    private static func bindServer(
        _ configuration: Configuration,
        core: SimulatorCore,
        sslContext: NIOSSLContext,
        group: MultiThreadedEventLoopGroup
    ) async throws -> any Channel {
        let isAcceptAll: Bool
        if case .acceptAll = configuration.handling { isAcceptAll = true } else { isAcceptAll = false }
        return try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 16)
            .childChannelInitializer { channel in
                // Accept-all skips every check, RFC 9113 header-block validation included (it is
                // about a tenth of the server's CPU per request).
                let validation: NIOHTTP2Handler.ValidationState = isAcceptAll ? .disabled : .enabled
                return channel.eventLoop.makeCompletedFuture {
                    let limit = core.effectiveMaxConcurrentStreams(core.faults)
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLServerHandler(context: sslContext))
                    let rawFrames = RawFrameWriter()
                    try sync.addHandler(rawFrames)
                    try sync.addHandler(
                        NIOHTTP2Handler(
                            mode: .server,
                            initialSettings: [
                                HTTP2Setting(parameter: .maxConcurrentStreams, value: limit),
                                HTTP2Setting(parameter: .maxHeaderListSize, value: 8_000),
                            ],
                            headerBlockValidation: validation,
                            contentLengthValidation: validation
                        )
                    )
                    try sync.addHandler(
                        SimulatorConnectionHandler(
                            core: core,
                            rawFrames: rawFrames,
                            connectionID: core.makeConnectionID(),
                            initialMaxConcurrentStreams: limit
                        )
                    )
                }
            }
            .bind(host: configuration.host, port: configuration.port)
            .get()
    }
}

extension APNsSimulator.Configuration: SimulatorConfiguration {}
