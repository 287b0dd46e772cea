public import NIOCore
package import NIOSSL
public import PushTransport
public import PushgateCore

extension APNsClient {
    public typealias Endpoint = PushTransport.Endpoint
    public typealias TrustRoots = PushTransport.TrustRoots
    public typealias ClientCertificate = PushTransport.ClientCertificate

    /// How the client proves who it is to APNs.
    public enum Authentication: Sendable {
        /// A TLS client certificate (Apple's push certificate) and its key.
        case certificate(ClientCertificate)
        /// Provider tokens (ES256 JWTs from a `.p8` key).
        case token(any APNsProviderTokenSource)
    }

    public struct Configuration: Sendable {
        public var endpoint: Endpoint
        public var authentication: Authentication
        public var trustRoots: TrustRoots = .system
        /// Upper bound on connections; another is opened only while every open one is full and work waits.
        /// 16 x APNs's 1,000 streams keeps 16,000 requests in flight: 100,000/s even at 160 ms of round trip.
        public var maximumConnections: Int = 16
        /// Our own cap on concurrent streams per connection; nil: whatever the server's
        /// SETTINGS_MAX_CONCURRENT_STREAMS allows (APNs grants 1,000), following its changes.
        public var maximumStreamsPerConnection: Int? = nil
        /// The C pushd's `-r`: new requests per second per connection (nil: no limit). Under sustained
        /// load the pool opens more connections, up to `maximumConnections`.
        public var maximumNotificationsPerSecondPerConnection: Int? = nil
        /// The most requests waiting for a connection. `submit` answers those beyond it at once with the
        /// retryable transport failure `queueFull` (push-back: the caller keeps them and submits later);
        /// a caller that keeps at most `inFlightCapacity` unanswered never meets it.
        public var maximumQueuedRequests: Int = 100_000
        /// A request still queued this long after it was submitted fails `deadline_exceeded` (never sent);
        /// a written request waits this long for its answer, from when it was written (queued time does
        /// not count), then fails `answer_timeout` (APNs may have accepted it: the dispatcher does not
        /// resend it).
        public var requestTimeout: TimeAmount = .seconds(30)
        public var connectTimeout: TimeAmount = .seconds(10)
        /// PING after this much silence (the C pushd's `-t`, default 60 minutes; nil disables).
        public var pingInterval: TimeAmount? = .minutes(60)
        public var pingTimeout: TimeAmount = .seconds(20)
        /// Close a connection after this long without requests (the C pushd's `-i`, default 24 hours; nil disables).
        public var idleTimeout: TimeAmount? = .hours(24)
        public var reconnectBaseDelay: TimeAmount = .milliseconds(100)
        public var reconnectMaximumDelay: TimeAmount = .seconds(30)
        /// Resends of a request APNs never processed (GOAWAY above last stream id, REFUSED_STREAM).
        public var maximumUnprocessedAttempts: Int = 3
        /// Granularity of deadline, ping and idle checks.
        public var tickInterval: TimeAmount = .milliseconds(100)
        /// Threads of the event loop group the client creates when none is given.
        public var eventLoopThreads: Int = System.coreCount
        public var shutdownGracePeriod: TimeAmount = .seconds(10)

        public init(endpoint: Endpoint, authentication: Authentication, trustRoots: TrustRoots = .system) {
            self.endpoint = endpoint
            self.authentication = authentication
            self.trustRoots = trustRoots
        }

        /// Our cap on concurrent streams per connection: a rate-limited connection counts as full at
        /// `rate` streams, so that sustained load opens more connections (the C pushd's `-r` behaviour)
        /// instead of queueing.
        var cappedStreamsPerConnection: Int? {
            [maximumStreamsPerConnection, maximumNotificationsPerSecondPerConnection].compactMap { $0 }.min()
        }

        package func makeTLSContext() throws -> NIOSSLContext {
            let certificate: ClientCertificate?
            switch authentication {
            case .certificate(let credentials): certificate = credentials
            case .token: certificate = nil
            }
            return try TransportTLS.makeContext(
                trustRoots: trustRoots,
                certificate: certificate,
                applicationProtocols: ["h2"]
            )
        }
    }
}

extension APNsClient.Configuration: TransportClientSettings {
    /// APNs's 1,000 streams, or our cap below it, until a connection's SETTINGS say.
    package var assumedStreamsPerConnection: Int { min(cappedStreamsPerConnection ?? 1000, 1000) }
    package var maximumResends: Int { maximumUnprocessedAttempts }
}

/// The name this error had before it moved to `PushTransport`.
public typealias APNsClientError = TransportSetupError

extension Endpoint {
    /// Apple's host for the environment, on 443 or (the C pushd's `-p`) 2197.
    public static func apple(_ environment: APNsEnvironment, alternativePort: Bool = false) -> Self {
        Endpoint(host: environment.host, port: alternativePort ? 2197 : 443)
    }
}
