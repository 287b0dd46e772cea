public import Foundation
public import Logging

extension FCMSimulator {
    public struct Configuration: Sendable {
        /// Loopback only.
        public var host = "127.0.0.1"
        /// HTTP/2 (and HTTP/1.1) over TLS: `POST /token` and `messages:send`. 0 picks a free port.
        public var port = 0
        /// The control API (plain HTTP/1.1); nil turns it off.
        public var controlPort: Int? = 0
        /// Accounts known from the start; more can be added while running.
        public var accounts: [FCMSimulatorAccount] = []
        /// `expires_in` of issued access tokens; Google says 3599.
        public var accessTokenLifetimeSeconds = 3599
        /// SETTINGS_MAX_CONCURRENT_STREAMS of each HTTP/2 connection (Google's is reported to be 100).
        public var maximumConcurrentStreams = 100
        /// Every answer of the TLS port (token endpoint and `messages:send`) is held this long, as if
        /// Google were this far away; changeable while running (`POST /faults {"latency_ms": N}`).
        public var latencyMilliseconds = 0
        /// Accepted messages kept for queries (oldest dropped first).
        public var recordLimit = 100_000
        /// The simulator's idea of now (token expiry, JWT time checks).
        public var now: @Sendable () -> Date = { Date() }
        public var eventLoopThreads = 1
        public var logger = Logger(label: "pushgate.fcm-simulator")

        public init() {}
    }
}
