import Foundation
import NIOCore
package import NIOSSL
public import PushTransport
public import PushgateCore

extension FCMClient {
    public typealias TrustRoots = PushTransport.TrustRoots

    /// One FCM client: one service account (one project, one access token) and one endpoint (Google,
    /// or a simulator with `--fcm-host` and `--ca`).
    public struct Configuration: Sendable {
        /// Whose access token authorises the sends, and which project they go to.
        public var serviceAccount: FCMServiceAccount
        /// Where `messages:send` is; Google's host by default.
        public var host: String = "fcm.googleapis.com"
        public var port: Int = 443
        /// Where assertions are exchanged for access tokens; nil: the service account's `token_uri`.
        public var tokenURI: String? = nil
        /// Which authorities may sign the certificates of `host` and of the token endpoint.
        public var trustRoots: TrustRoots = .system
        /// Upper bound on connections; another is opened only while every open one is full and work waits.
        public var maxConnections: Int = 16
        /// Our own cap on concurrent streams per connection; nil: the server's SETTINGS_MAX_CONCURRENT_STREAMS.
        public var maxStreams: Int? = nil
        /// A message still queued this long after it was submitted fails `deadline_exceeded` (never sent);
        /// a written message waits this long for its answer, from when it was written (queued time does
        /// not count), then fails `answer_timeout` (FCM may have accepted it: the dispatcher does not
        /// resend it).
        public var requestTimeout: Duration = .seconds(30)
        public var connectTimeout: Duration = .seconds(10)
        /// The most messages waiting for a connection; beyond it `submit` answers `queueFull` at once.
        public var maximumQueuedRequests: Int = 100_000
        /// Close a connection after this long without requests (nil: never).
        public var idleTimeout: Duration? = .seconds(3600)
        /// PING after this much silence (nil: never).
        public var pingInterval: Duration? = .seconds(3600)
        public var pingTimeout: Duration = .seconds(20)
        public var reconnectBaseDelay: Duration = .milliseconds(100)
        public var reconnectMaximumDelay: Duration = .seconds(30)
        /// Resends of a message FCM never processed (GOAWAY above last stream id, REFUSED_STREAM).
        public var maximumUnprocessedAttempts: Int = 3
        /// Granularity of deadline, ping and idle checks.
        public var tickInterval: Duration = .milliseconds(100)
        /// How long the token endpoint may take to answer.
        public var tokenExchangeTimeout: Duration = .seconds(10)
        /// When a failed access-token fetch is tried again: after an outage 0.5 s doubling to 30 s, after a
        /// definitive refusal 30 s doubling to 10 minutes (each with jitter).
        public var tokenFetchBackoff = FCMTokenFetchBackoff.Configuration()
        /// Threads of the event loop group the client creates when none is given.
        public var eventLoopThreads: Int = System.coreCount
        public var shutdownGracePeriod: Duration = .seconds(10)

        public init(
            serviceAccount: FCMServiceAccount,
            host: String = "fcm.googleapis.com",
            port: Int = 443,
            tokenURI: String? = nil,
            trustRoots: TrustRoots = .system
        ) {
            self.serviceAccount = serviceAccount
            self.host = host
            self.port = port
            self.tokenURI = tokenURI
            self.trustRoots = trustRoots
        }

        /// `host:port` of `messages:send`.
        public var endpoint: Endpoint { Endpoint(host: host, port: port) }

        /// The service account the access tokens are fetched for: `tokenURI`, when set, replaces its
        /// `token_uri` (as the assertion's `aud` and as the exchange's address).
        public func effectiveServiceAccount() throws -> FCMServiceAccount {
            guard let tokenURI else { return serviceAccount }
            guard let url = URL(string: tokenURI), FCMServiceAccount.isAcceptableTokenURI(url) else {
                throw FCMCredentialError.invalidTokenURI
            }
            return serviceAccount.replacingTokenURI(url)
        }

        package func makeTLSContext() throws -> NIOSSLContext {
            try TransportTLS.makeContext(trustRoots: trustRoots, certificate: nil, applicationProtocols: ["h2"])
        }
    }
}

extension FCMClient.Configuration: TransportClientSettings {
    package var maximumConnections: Int { maxConnections }
    /// FCM's stream limit is not documented (100 is reported): assumed until a connection's SETTINGS say.
    package var assumedStreamsPerConnection: Int { min(maxStreams ?? 100, 100) }
    package var maximumResends: Int { maximumUnprocessedAttempts }
}
