import Foundation
public import Logging
import NIOCore
import NIOPosix
import NIOSSL
public import PushTransport
public import PushgateCore
public import ServiceLifecycle

/// Polls the legacy feedback service: connects with the app's certificate, reads the tuples (timestamp,
/// token) until the server closes, and invalidates each device unless the app registered it again after
/// the tuple's timestamp (`DeviceRegistry.invalidate` with Apple's timestamp decides that). The first
/// poll runs at start-up, then one every `interval`.
///
/// **Apple retired the feedback service with the legacy gateway on 31 March 2021.** The HTTP/2 API
/// reports dead tokens as 410 `Unregistered` instead.
public struct FeedbackPoller: Service {
    public struct Configuration: Sendable {
        public var endpoint: Endpoint
        public var certificate: ClientCertificate
        public var trustRoots: TrustRoots
        /// Between polls; Apple advised daily.
        public var interval: Duration = .seconds(86_400)
        /// The registry app the devices belong to.
        public var app: String
        public var connectTimeout: Duration = .seconds(10)
        /// A service that neither sends nor closes for this long is cut off; what it sent is used.
        public var readTimeout: Duration = .seconds(60)

        public init(
            endpoint: Endpoint,
            app: String,
            certificate: ClientCertificate,
            trustRoots: TrustRoots
        ) {
            self.endpoint = endpoint
            self.app = app
            self.certificate = certificate
            self.trustRoots = trustRoots
        }
    }

    /// What one poll did.
    public struct PollResult: Sendable, Hashable, CustomStringConvertible {
        /// Tuples read.
        public var read = 0
        /// Devices invalidated.
        public var pruned = 0
        /// Devices kept because they were registered again after the tuple's timestamp.
        public var keptRegisteredLater = 0
        /// Already invalid, or unknown to the registry: nothing changed.
        public var unchanged = 0
        /// Set when the read ended in an error (the tuples before it were still applied).
        public var readError: String?

        public init() {}

        public var description: String {
            "read=\(read) pruned=\(pruned) kept_registered_later=\(keptRegisteredLater) unchanged=\(unchanged)"
                + (readError.map { " read_error=\($0)" } ?? "")
        }
    }

    public let configuration: Configuration
    private let registry: any DeviceRegistry
    private let clock: any WallClock
    private let logger: Logger

    public init(configuration: Configuration, registry: any DeviceRegistry, clock: any WallClock, logger: Logger) {
        self.configuration = configuration
        self.registry = registry
        self.clock = clock
        var logger = logger
        logger[metadataKey: "apns.legacy.feedback"] = "\(configuration.endpoint)"
        self.logger = logger
    }

    public func run() async throws {
        let tlsContext = try TransportTLS.makeContext(
            trustRoots: configuration.trustRoots,
            certificate: configuration.certificate,
            applicationProtocols: []
        )
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        while !Task.isCancelled, !Task.isShuttingDownGracefully {
            do {
                _ = try await poll(tlsContext: tlsContext, group: group)
            } catch {
                logger.warning(
                    "feedback poll failed; trying again at the next interval",
                    metadata: ["apns.error": "\(error)"]
                )
            }
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: configuration.interval) }
            } catch {
                break
            }
        }
        try? await group.shutdownGracefully()
    }

    /// One poll: read everything the service sends, apply it to the registry. Throws only when the
    /// service could not be reached; a read that ends badly still applies the tuples read before it.
    public func pollOnce() async throws -> PollResult {
        let tlsContext = try TransportTLS.makeContext(
            trustRoots: configuration.trustRoots,
            certificate: configuration.certificate,
            applicationProtocols: []
        )
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            let result = try await poll(tlsContext: tlsContext, group: group)
            try? await group.shutdownGracefully()
            return result
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    private func poll(tlsContext: NIOSSLContext, group: any EventLoopGroup) async throws -> PollResult {
        var result = PollResult()
        let (tuples, readError) = try await read(tlsContext: tlsContext, group: group)
        result.read = tuples.count
        result.readError = readError
        let now = clock.now()
        for tuple in tuples {
            switch try await registry.invalidate(
                app: configuration.app,
                token: tuple.token,
                reason: .unregistered,
                appleTimestamp: tuple.timestamp,
                at: now
            )
            {
            case .invalidated: result.pruned += 1
            case .keptBecauseRegisteredLater: result.keptRegisteredLater += 1
            case .alreadyInvalid, .unknownDevice: result.unchanged += 1
            }
        }
        var metadata: Logger.Metadata = [
            "apns.legacy.feedback_read": "\(result.read)", "apns.legacy.feedback_pruned": "\(result.pruned)",
            "apns.legacy.feedback_kept": "\(result.keptRegisteredLater)",
            "apns.legacy.feedback_unchanged": "\(result.unchanged)",
            "push.app": "\(configuration.app)",
        ]
        if let readError {
            metadata["apns.error"] = "\(readError)"
            logger.warning("feedback read ended early; applied what was read", metadata: metadata)
        } else {
            logger.info("feedback polled", metadata: metadata)
        }
        return result
    }

    /// Connects and reads tuples until the server closes (or the read timeout cuts it off).
    private func read(
        tlsContext: NIOSSLContext,
        group: any EventLoopGroup
    ) async throws -> ([LegacyFeedbackTuple], String?) {
        let endpoint = configuration.endpoint
        let connectTimeout = TimeAmount(configuration.connectTimeout)
        let channel = try await TransportBootstrap.make(group: group, connectTimeout: connectTimeout)
            .connect(host: endpoint.host, port: endpoint.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try TransportBootstrap.addTLS(to: channel, endpoint: endpoint, context: tlsContext)
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LegacyFeedbackDecoder()))
                    return try NIOAsyncChannel<LegacyFeedbackTuple, Never>(wrappingChannelSynchronously: channel)
                }
            }
        let cutOff = channel.channel.eventLoop.scheduleTask(in: TimeAmount(configuration.readTimeout)) { [channel] in
            channel.channel.close(promise: nil)
        }
        defer { cutOff.cancel() }
        var tuples: [LegacyFeedbackTuple] = []
        var readError: String?
        do {
            try await channel.executeThenClose { inbound, _ in
                for try await tuple in inbound { tuples.append(tuple) }
            }
        } catch let error as NIOSSLError where error == .uncleanShutdown {
            // The service closed the TCP connection without a TLS close_notify: the end of the list.
        } catch let error as LegacyDecodingError {
            readError = "\(error)"
        } catch {
            if tuples.isEmpty { throw error }
            readError = TransportTLS.describe(error)
        }
        return (tuples, readError)
    }
}
