public import APNsTransport
public import Logging
public import NIOCore
import NIOSSL
public import PushTransport
public import PushgateCore
import Synchronization

/// A client for the APNs HTTP/2 provider API: one pool of connections for one set of credentials and
/// one endpoint (production, sandbox, or a simulator/proxy).
///
/// Two ways to send:
/// - `send(_:to:)` awaits one outcome (the `pushgate send` path);
/// - `submit(_:)` queues many requests whose outcomes go to an `APNsOutcomeReceiver` (the
///   dispatcher's path: no task or continuation per notification).
///
/// Lifecycle (``PushTransportClient``): `run()` (a `Service`) keeps it alive until graceful shutdown,
/// then lets open streams finish; or use `withClient(configuration:) { client in ... }`.
public final class APNsClient: PushTransportClient {
    public let configuration: Configuration
    public typealias Submission = APNsRequest

    public let transportFront: TransportFront<Submission>
    private let tokens: APNsTokenSlot
    private let currentAuthentication: Mutex<Authentication>

    public convenience init(
        configuration: Configuration,
        eventLoopGroup: (any EventLoopGroup)? = nil,
        logger: Logger? = nil
    ) throws {
        try self.init(configuration: configuration, eventLoopGroup: eventLoopGroup, logger: logger, metrics: .disabled)
    }

    /// - Parameter metrics: where the client's metrics go (`APNsClientMetrics`, made with the gateway's
    ///   `MetricsFactory`).
    public init(
        configuration: Configuration,
        eventLoopGroup: (any EventLoopGroup)? = nil,
        logger: Logger? = nil,
        metrics: APNsClientMetrics
    ) throws {
        var logger = logger ?? Logger(label: "pushgate.apns")
        logger[metadataKey: "apns.endpoint"] = "\(configuration.endpoint)"
        self.configuration = configuration
        let tokenSource: (any APNsProviderTokenSource)?
        switch configuration.authentication {
        case .certificate: tokenSource = nil
        case .token(let source): tokenSource = source
        }
        tokens = APNsTokenSlot(tokenSource)
        currentAuthentication = Mutex(configuration.authentication)
        let plugin = APNsHTTP2Plugin(
            connection: .init(
                pingInterval: configuration.pingInterval,
                pingTimeout: configuration.pingTimeout,
                idleTimeout: configuration.idleTimeout,
                maximumStreams: configuration.cappedStreamsPerConnection
            ),
            authority: configuration.endpoint.host,
            requestsPerSecondPerConnection: configuration.maximumNotificationsPerSecondPerConnection,
            tokens: tokens,
            metrics: metrics
        )
        transportFront = try TransportFront(
            settings: configuration,
            plugin: plugin,
            loops: TransportEventLoops(eventLoopGroup, threads: configuration.eventLoopThreads),
            logger: logger
        )
    }

    /// Sends one notification to one device and waits for the outcome. Cancelling the task abandons
    /// the request and frees its stream.
    public func send(
        _ notification: PreparedNotification,
        to deviceToken: DeviceToken,
        apnsID: APNsID? = nil,
        deadline: NIODeadline? = nil
    ) async -> APNsOutcome {
        let receiver = SingleOutcomeReceiver()
        return await transportFront.submitAndWait(
            APNsRequest(
                notification: notification,
                deviceToken: deviceToken,
                apnsID: apnsID,
                receiver: receiver,
                deadline: deadline
            ),
            resuming: receiver.single
        )
    }

    /// The credentials new connections authenticate with: `configuration.authentication` until
    /// ``renew(_:)`` replaces them.
    public var authentication: Authentication { currentAuthentication.withLock { $0 } }

    /// New credentials made ready without changing anything: the TLS context they need is built here, so
    /// that a certificate NIOSSL refuses throws before any part of a reload is applied.
    public func prepareRenewal(_ authentication: Authentication) throws -> CredentialRenewal {
        var configuration = self.configuration
        configuration.authentication = authentication
        return CredentialRenewal(authentication: authentication, tlsContext: try configuration.makeTLSContext())
    }

    /// Replaces the credentials (a reload): connections opened from now on authenticate with the new
    /// ones; the connections open now take nothing new, finish what they hold and close. Returns how
    /// many connections drain.
    @discardableResult
    public func renew(_ renewal: CredentialRenewal) -> Int {
        let source: (any APNsProviderTokenSource)?
        switch renewal.authentication {
        case .certificate: source = nil
        case .token(let tokenSource): source = tokenSource
        }
        return transportFront.renewConnections(tlsContext: renewal.tlsContext) {
            tokens.current = source
            currentAuthentication.withLock { $0 = renewal.authentication }
        }
    }

    /// Credentials ready to replace a client's (``prepareRenewal(_:)``).
    public struct CredentialRenewal: Sendable {
        public let authentication: Authentication
        let tlsContext: NIOSSLContext
    }

    /// False while APNs cannot be reached: the last connection attempt failed and none succeeded since.
    /// True before any attempt (connections open on demand) and while a connection is up. For `/readyz`.
    public var isAPNsReachable: Bool { transportFront.isReachable }
}

extension APNsClient: APNsNotificationTransport {}

/// Hands one request's outcome to the task awaiting it.
private final class SingleOutcomeReceiver: APNsOutcomeReceiver {
    let single = SingleOutcome<APNsOutcome>()

    func receive(_ outcome: APNsOutcome, for request: APNsRequest) {
        single.resume(outcome)
    }
}
