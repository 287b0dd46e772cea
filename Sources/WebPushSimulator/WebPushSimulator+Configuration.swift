public import Foundation
public import Logging

extension WebPushSimulator {
    public struct Configuration: Sendable {
        /// One push service origin: a TLS listener of its own.
        public struct Origin: Sendable, Hashable {
            /// 0 picks a free port.
            public var port = 0
            /// ALPN offers `h2` and `http/1.1` when true; only `http/1.1` when false (an origin that
            /// does not speak HTTP/2, so a client must fall back to HTTP/1.1 keep-alive).
            public var offersHTTP2 = true

            public init(port: Int = 0, offersHTTP2: Bool = true) {
                self.port = port
                self.offersHTTP2 = offersHTTP2
            }
        }

        /// Loopback only.
        public var host = "127.0.0.1"
        /// The push services' origins: by default two, one offering HTTP/2 and one HTTP/1.1 only.
        public var origins: [Origin] = [Origin(), Origin(offersHTTP2: false)]
        /// The control API (plain HTTP/1.1); nil turns it off.
        public var controlPort: Int? = 0
        /// SETTINGS_MAX_CONCURRENT_STREAMS of each HTTP/2 connection.
        public var maximumConcurrentStreams = 100
        /// Every push answer is held this long; changeable while running (`POST /faults`).
        public var latencyMilliseconds = 0
        /// Received messages kept for queries (oldest dropped first).
        public var recordLimit = 100_000
        /// Whether each message is decrypted (and refused with 400 when it does not decrypt). Off only
        /// for load tests that measure the sender, not this simulator: the message is then recorded
        /// without its plaintext.
        public var decryptsMessages = true
        /// 1 (default), the checking mode: every message decrypted and every VAPID token's signature
        /// verified. N > 1, for throughput runs, checks what a real push service checks (which decrypts
        /// nothing): a token's signature once per origin and distinct `Authorization` header (its `exp`
        /// on every message), every message's headers and `aes128gcm` record header; and decrypts every
        /// Nth message, so that wrong encryption still fails the run. See ``WebPushSimulatorChecking``.
        public var decryptEvery = 1
        /// The simulator's idea of now (VAPID `exp` checks).
        public var now: @Sendable () -> Date = { Date() }
        public var eventLoopThreads = 1
        /// Threads that check and decrypt push messages (``WebPushSimulatorHTTPHandler``); 0 (default):
        /// each on its connection's event loop. A load test's one HTTP/2 connection otherwise has its
        /// every message checked on one thread.
        public var workerThreads = 0
        public var logger = Logger(label: "pushgate.webpush-simulator")

        public init() {}
    }
}
