public import APNsTransport
import Foundation
public import Logging
public import NIOCore
package import NIOSSL
public import PushTransport
public import PushgateCore

/// Sends notifications over Apple's legacy binary provider interface (the frame format, command 2),
/// answering in the same vocabulary as the HTTP/2 `APNsClient`, so the dispatcher, the ledger and the
/// reports do not care which one an app uses.
///
/// **Apple retired this interface on 31 March 2021**: its servers no longer accept it. It remains for
/// gateways and test rigs that still speak it.
///
/// Persistent, pooled TLS connections with the app's certificate (never one per notification). Each
/// connection numbers what it writes and keeps a window of it; an error response reports the failed
/// notification and resends what followed it on another connection. When a notification counts as
/// delivered is `LegacyConnectionStateMachine`'s rule (see `docs/legacy.md`).
public final class LegacySender: APNsNotificationTransport, PushTransportClient {
    public struct Configuration: Sendable {
        /// `host:port` of the legacy gateway.
        public var gateway: Endpoint
        public var certificate: ClientCertificate
        public var trustRoots: TrustRoots
        /// Connections kept open, at most; another opens only while every open one has a full window.
        public var maximumConnections: Int = 4
        /// A notification counts as delivered once this long has passed since it reached the socket,
        /// with the connection still open and no error response. Longer is safer against a slow gateway
        /// (an error response after the quiet time cannot be attributed, see `docs/legacy.md`); shorter
        /// frees the dispatcher's in-flight window sooner.
        public var confirmationQuietTime: Duration = .seconds(1)
        /// Notifications one connection may hold unconfirmed.
        public var windowSize: Int = 10_000
        /// How often a notification of unknown fate (its connection lost without an error response,
        /// or discarded after another's error or a Shutdown) is sent again before it is handed back as
        /// a retryable `connection_lost`, for the dispatcher's back-off.
        public var maximumResends: Int = 3
        /// The most notifications waiting for a connection; beyond it `submit` answers `queueFull` at once.
        public var maximumQueuedRequests: Int = 100_000
        /// A notification still queued (no connection could take it) after this long fails.
        public var requestTimeout: Duration = .seconds(30)
        public var connectTimeout: Duration = .seconds(10)
        public var reconnectBaseDelay: Duration = .milliseconds(100)
        public var reconnectMaximumDelay: Duration = .seconds(30)
        /// Granularity of confirmations and deadlines.
        public var tickInterval: Duration = .milliseconds(50)
        /// On shutdown, how long open connections may take to confirm what they hold.
        public var shutdownGracePeriod: Duration = .seconds(5)
        public var eventLoopThreads: Int = 1

        public init(
            gateway: Endpoint,
            certificate: ClientCertificate,
            trustRoots: TrustRoots
        ) {
            self.gateway = gateway
            self.certificate = certificate
            self.trustRoots = trustRoots
        }

        func validate() throws {
            func fail(_ key: String, _ problem: String) -> LegacyConfigurationError {
                LegacyConfigurationError(key: key, problem: problem)
            }
            guard maximumConnections >= 1 else { throw fail("maximumConnections", "must be at least 1") }
            guard windowSize >= 1 else { throw fail("windowSize", "must be at least 1") }
            guard confirmationQuietTime > .zero else { throw fail("confirmationQuietTime", "must be positive") }
            guard maximumResends >= 0 else { throw fail("maximumResends", "must be 0 or more") }
            guard tickInterval > .zero else { throw fail("tickInterval", "must be positive") }
            guard eventLoopThreads >= 1 else { throw fail("eventLoopThreads", "must be at least 1") }
            guard maximumQueuedRequests >= 1 else { throw fail("maximumQueuedRequests", "must be at least 1") }
        }
    }

    public let configuration: Configuration
    public typealias Submission = APNsRequest

    public let transportFront: TransportFront<Submission>

    public init(
        configuration: Configuration,
        eventLoopGroup: (any EventLoopGroup)? = nil,
        logger: Logger? = nil
    ) throws {
        try configuration.validate()
        var logger = logger ?? Logger(label: "pushgate.apns.legacy")
        logger[metadataKey: "apns.legacy.gateway"] = "\(configuration.gateway)"
        self.configuration = configuration
        let quietTime = TimeAmount(configuration.confirmationQuietTime)
        transportFront = try TransportFront(
            settings: configuration,
            plugin: LegacyPlugin(quietTime: quietTime, windowSize: configuration.windowSize),
            loops: TransportEventLoops(eventLoopGroup, threads: configuration.eventLoopThreads),
            logger: logger
        )
    }
}

extension LegacySender.Configuration: TransportClientSettings {
    package var endpoint: Endpoint { gateway }
    /// Until a connection is up, its window.
    package var assumedStreamsPerConnection: Int { windowSize }

    package func makeTLSContext() throws -> NIOSSLContext {
        try TransportTLS.makeContext(trustRoots: trustRoots, certificate: certificate, applicationProtocols: [])
    }
}

extension Endpoint {
    /// Apple's former legacy gateway (`gateway.push.apple.com:2195`, sandbox `gateway.sandbox.push.apple.com:2195`).
    /// Retired on 31 March 2021: it no longer accepts connections for this protocol.
    public static func legacyGateway(_ environment: APNsEnvironment) -> Self {
        switch environment {
        case .production: .init(host: "gateway.push.apple.com", port: 2195)
        case .sandbox: .init(host: "gateway.sandbox.push.apple.com", port: 2195)
        }
    }

    /// Apple's former feedback service (`feedback.push.apple.com:2196`, sandbox `feedback.sandbox.push.apple.com:2196`).
    /// Retired with the legacy gateway.
    public static func legacyFeedback(_ environment: APNsEnvironment) -> Self {
        switch environment {
        case .production: .init(host: "feedback.push.apple.com", port: 2196)
        case .sandbox: .init(host: "feedback.sandbox.push.apple.com", port: 2196)
        }
    }
}

/// A legacy transport configured wrongly; names the setting.
public struct LegacyConfigurationError: Error, Hashable, CustomStringConvertible {
    public let key: String
    public let problem: String

    public var description: String { "\(key): \(problem)" }
}
