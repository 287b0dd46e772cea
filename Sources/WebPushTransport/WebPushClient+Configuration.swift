import NIOCore
public import PushTransport
public import WebPush

extension WebPushClient {
    public typealias TrustRoots = PushTransport.TrustRoots

    /// One Web Push client: one VAPID key and subject (one app), any number of origins.
    public struct Configuration: Sendable {
        /// Signs every message's VAPID token (`app.NAME.webpush.vapidKey`).
        public var vapidKey: VAPIDKey
        /// The token's `sub` (`app.NAME.webpush.subject`).
        public var subject: VAPIDSubject
        /// Which authorities may sign the push services' certificates; always verified.
        public var trustRoots: TrustRoots = .system
        /// Connections to one origin at most; another is opened only while every open one is full and
        /// work waits (an HTTP/1.1 connection is full with one request).
        public var maximumConnectionsPerOrigin: Int = 8
        /// Connections over every origin at most; a connection beyond it waits for another to close.
        public var maximumConnections: Int = 256
        /// Our cap on concurrent streams per HTTP/2 connection; nil: the server's SETTINGS_MAX_CONCURRENT_STREAMS.
        public var maximumStreamsPerConnection: Int? = nil
        /// Close a connection after this long without requests (nil: never). Also what frees a slot of
        /// ``maximumConnections`` for another origin.
        public var idleTimeout: Duration? = .seconds(120)
        /// A message still queued this long after it was submitted fails `deadline_exceeded` (never sent);
        /// a written message waits this long for its answer, from when it was written, then fails
        /// `answer_timeout` (it may have been accepted: not sent again).
        public var requestTimeout: Duration = .seconds(30)
        public var connectTimeout: Duration = .seconds(10)
        /// Messages waiting for a connection, per origin; beyond it `submit` answers `queueFull` at once.
        public var maximumQueuedRequestsPerOrigin: Int = 100_000
        public var reconnectBaseDelay: Duration = .milliseconds(100)
        public var reconnectMaximumDelay: Duration = .seconds(30)
        /// Times a message that went back unanswered (GOAWAY, REFUSED_STREAM, a dropped connection, a
        /// refused VAPID token) is sent again before it fails.
        public var maximumResends: Int = 3
        /// PING an HTTP/2 connection after this much silence (nil: never).
        public var pingInterval: Duration? = .seconds(600)
        public var pingTimeout: Duration = .seconds(20)
        /// Granularity of deadline, ping and idle checks.
        public var tickInterval: Duration = .milliseconds(100)
        /// The VAPID tokens' lifetime and refresh margin.
        public var vapidTokens = VAPIDTokenCache.Configuration()
        /// Threads of the event loop group the client creates when none is given.
        public var eventLoopThreads: Int = System.coreCount
        public var shutdownGracePeriod: Duration = .seconds(10)

        public init(vapidKey: VAPIDKey, subject: VAPIDSubject, trustRoots: TrustRoots = .system) {
            self.vapidKey = vapidKey
            self.subject = subject
            self.trustRoots = trustRoots
        }

        /// What an HTTP/2 connection is taken to carry until one says (`inFlightCapacity`).
        var assumedStreamsPerConnection: Int { min(maximumStreamsPerConnection ?? 100, 100) }

        /// Refuses caps below 1 and a VAPID token lifetime over 24 h, naming the setting.
        func validated() throws -> Self {
            for (key, value) in [
                ("maximumConnectionsPerOrigin", maximumConnectionsPerOrigin),
                ("maximumConnections", maximumConnections),
                ("maximumQueuedRequestsPerOrigin", maximumQueuedRequestsPerOrigin),
                ("maximumStreamsPerConnection", maximumStreamsPerConnection ?? 1),
            ] where value < 1 {
                throw WebPushClientConfigurationError(key: key, problem: "must be at least 1")
            }
            _ = try vapidTokens.validated()
            return self
        }
    }
}

/// A ``WebPushClient/Configuration`` setting out of range, by name.
public struct WebPushClientConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    public let key: String
    public let problem: String
    public var description: String { "webpush client: \(key) \(problem)" }
}
