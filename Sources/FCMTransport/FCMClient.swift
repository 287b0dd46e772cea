import AsyncHTTPClient
import Foundation
public import Logging
public import NIOCore
public import PushTransport
public import PushgateCore
import Synchronization

/// A client for FCM's HTTP v1 `messages:send`: one pool of HTTP/2 connections for one service account
/// and one endpoint (Google, or a simulator).
///
/// Two ways to send, as `APNsClient`:
/// - `send(_:to:)` awaits one outcome (the `pushgate send` path);
/// - `submit(_:)` queues many messages whose outcomes go to an `FCMOutcomeReceiver` (the dispatcher's path).
///
/// Authorization is `Bearer` with the service account's access token: one token per client, fetched
/// on first use (AsyncHTTPClient to `token_uri`), refreshed before it expires, one fetch at a time. An
/// outage of the token endpoint delays sends (fetches back off with jitter, sends wait for the token);
/// only a definitive refusal of the credentials is an alarm (``credentialAlarm``), and even then the
/// messages are completed as held, not failed.
///
/// Lifecycle, as every ``PushTransportClient``: `init` opens nothing (connections open on demand);
/// `run()` (a `Service`) keeps it alive until graceful shutdown, then lets open streams finish; or
/// `withClient { ... }`. Shutdown stops the pool, then the access-token client.
public final class FCMClient: FCMNotificationTransport, PushTransportClient {
    public let configuration: Configuration
    public typealias Submission = FCMSendRequest

    public let transportFront: TransportFront<Submission>
    /// The access tokens of every service account this client used (a reload adds one), current last.
    private let managers: Mutex<[FCMAccessTokenManager]>
    private let bearers: FCMBearerSlot
    private let exchanger: FCMTokenExchanger
    private let clock: any WallClock
    private let tokenFetchBackoff: FCMTokenFetchBackoff.Configuration
    private let logger: Logger

    public convenience init(
        configuration: Configuration,
        eventLoopGroup: (any EventLoopGroup)? = nil,
        logger: Logger? = nil
    ) throws {
        let clock = SystemWallClock()
        try self.init(configuration: configuration, eventLoopGroup: eventLoopGroup, logger: logger, clock: clock)
    }

    /// - Parameter clock: the wall clock of access-token expiry and `Retry-After` dates.
    public init(
        configuration: Configuration,
        eventLoopGroup: (any EventLoopGroup)? = nil,
        logger: Logger? = nil,
        clock: any WallClock
    ) throws {
        var logger = logger ?? Logger(label: "pushgate.fcm")
        logger[metadataKey: "fcm.endpoint"] = "\(configuration.endpoint)"
        self.configuration = configuration
        let account = try configuration.effectiveServiceAccount()
        let tokenTLS = try TransportTLS.makeConfiguration(
            trustRoots: configuration.trustRoots,
            certificate: nil,
            applicationProtocols: []
        )
        let loops = TransportEventLoops(eventLoopGroup, threads: configuration.eventLoopThreads)
        let tokenClient = HTTPClient(eventLoopGroup: loops.group, configuration: .init(tlsConfiguration: tokenTLS))
        exchanger = FCMTokenExchanger(client: tokenClient, timeout: TimeAmount(configuration.tokenExchangeTimeout))
        self.clock = clock
        let tokens = FCMAccessTokenManager(
            signer: FCMAssertionSigner(account: account),
            exchanger: exchanger,
            clock: clock
        )
        managers = Mutex([tokens])
        tokenFetchBackoff = configuration.tokenFetchBackoff
        self.logger = logger
        let bearers = FCMBearerSlot(
            FCMBearerCache(manager: tokens, clock: clock, backoff: configuration.tokenFetchBackoff, logger: logger)
        )
        self.bearers = bearers
        let authority = configuration.port == 443 ? configuration.host : "\(configuration.endpoint)"
        let plugin = FCMHTTP2Plugin(
            connection: .init(
                pingInterval: configuration.pingInterval.map(TimeAmount.init),
                pingTimeout: TimeAmount(configuration.pingTimeout),
                idleTimeout: configuration.idleTimeout.map(TimeAmount.init),
                maximumStreams: configuration.maxStreams
            ),
            headers: FCMRequestHeaders(authority: authority, projectID: account.projectID),
            bearers: bearers,
            clock: clock
        )
        transportFront = try TransportFront(
            settings: configuration,
            plugin: plugin,
            loops: loops,
            logger: logger,
            dependents: [
                {
                    for bearer in bearers.all { await bearer.shutdown() }
                },
                { try? await tokenClient.shutdown() },
            ]
        )
    }

    /// Sends one message to one registration token and waits for the outcome. Cancelling the task
    /// abandons the message and frees its stream.
    public func send(_ message: FCMMessage, to token: String, deadline: NIODeadline? = nil) async -> FCMOutcome {
        let receiver = SingleOutcomeReceiver()
        return await transportFront.submitAndWait(
            FCMSendRequest(message: message, token: token, receiver: receiver, deadline: deadline),
            resuming: receiver.single
        )
    }

    /// Fetches the access token now, rather than with the first message: a wrong service account or
    /// token endpoint shows here as the exchange's error.
    public func prepare() async throws(FCMCredentialError) {
        try await bearers.current.prefetch()
    }

    /// The service account whose access tokens new connections write with: `configuration.serviceAccount`
    /// (with `fcm.tokenUri` applied) until ``renew(_:)`` replaces it.
    public var serviceAccount: FCMServiceAccount { managers.withLock { $0.last!.account } }

    /// A new service account made ready without changing anything: throws when `fcm.tokenUri` does not
    /// fit it, before any part of a reload is applied. `account` must belong to the same project as the
    /// running one: the requests' path names it.
    public func prepareRenewal(serviceAccount: FCMServiceAccount) throws -> CredentialRenewal {
        var configuration = self.configuration
        configuration.serviceAccount = serviceAccount
        return CredentialRenewal(account: try configuration.effectiveServiceAccount())
    }

    /// Replaces the service account (a reload): access tokens are fetched for the new account from now on,
    /// by the connections opened from now on; those open now take nothing new, finish what they hold (with
    /// the old account's token) and close. Returns how many connections drain.
    @discardableResult
    public func renew(_ renewal: CredentialRenewal) -> Int {
        let tokens = FCMAccessTokenManager(
            signer: FCMAssertionSigner(account: renewal.account),
            exchanger: exchanger,
            clock: clock
        )
        let bearer = FCMBearerCache(manager: tokens, clock: clock, backoff: tokenFetchBackoff, logger: logger)
        return transportFront.renewConnections(tlsContext: nil) {
            managers.withLock { $0.append(tokens) }
            bearers.replace(with: bearer)
        }
    }

    /// A service account ready to replace a client's (``prepareRenewal(serviceAccount:)``).
    public struct CredentialRenewal: Sendable {
        let account: FCMServiceAccount
    }

    /// False while FCM cannot be reached: the last connection attempt failed and none succeeded since.
    public var isFCMReachable: Bool { transportFront.isReachable }

    /// How many access tokens were fetched (for metrics and tests).
    public var accessTokenFetches: Int { managers.withLock { $0.reduce(0) { $0 + $1.fetches } } }

    /// How many access tokens were obtained: the fetches that succeeded. A fetch that failed (a timeout on
    /// a loaded machine, an outage) is tried again and counts in ``accessTokenFetches`` only.
    public var accessTokensObtained: Int { managers.withLock { $0.reduce(0) { $0 + $1.tokensObtained } } }

    /// While the token endpoint refuses the service account's credentials (the last fetch was refused:
    /// `invalid_grant`, `invalid_client`...), what it answered and since when, for `/readyz`; nil otherwise.
    /// Outages of the endpoint are not alarms: they only delay.
    public var credentialAlarm: String? {
        guard let refusal = bearers.current.refusal else { return nil }
        return
            "the FCM token endpoint refuses the service account's credentials (\(refusal.error.safeDetail ?? "\(refusal.error)")) since \(refusal.since.formatted(.iso8601)); its devices wait (until their request expires), next attempt \(refusal.retryAt.formatted(.iso8601))"
    }
}

/// Hands one message's outcome to the task awaiting it.
private final class SingleOutcomeReceiver: FCMOutcomeReceiver {
    let single = SingleOutcome<FCMOutcome>()

    func receive(_ outcome: FCMOutcome, for request: FCMSendRequest) {
        single.resume(outcome)
    }
}
