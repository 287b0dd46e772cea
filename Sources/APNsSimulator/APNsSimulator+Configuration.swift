public import Logging

extension APNsSimulator {
    /// Everything a simulator needs; defaults inline. Checked when it starts.
    public struct Configuration: Sendable {
        /// Where the server certificate and key come from.
        public enum TLSMaterial: Sendable {
            /// Generate a CA (P-256) and a server certificate for `localhost`, `127.0.0.1` and `::1`.
            case generated
            /// Issue the server certificate from this CA (so tests can also issue client certificates).
            case authority(SimulatorCertificateAuthority)
            /// Use this certificate chain and key (PEM text).
            case pem(certificateChain: String, privateKey: String)
            /// Use this certificate chain and key (PEM files).
            case files(certificateChain: String, privateKey: String)
        }

        /// The APNs environment imitated: development answers carry `apns-unique-id` (Apple: "only
        /// available in the Development environment"), production answers do not.
        public enum Environment: String, Sendable {
            case development
            case production
        }

        /// The address both listeners bind to.
        public var host: String = "127.0.0.1"
        /// The HTTP/2 port; 0 picks a free one.
        public var port: Int = 0
        /// The control API's port; nil = no control API, 0 = a free one.
        public var controlPort: Int? = nil
        /// The legacy binary gateway's port (Apple's was 2195); nil = off, 0 = a free one. Same TLS
        /// and client-certificate checks as the HTTP/2 port.
        public var legacyPort: Int? = nil
        /// The legacy feedback service's port (Apple's was 2196); nil = off, 0 = a free one.
        public var feedbackPort: Int? = nil
        public var tls: TLSMaterial = .generated
        /// Where to write the CA certificate (PEM) with `.generated` or `.authority` TLS material.
        /// nil = a file in a fresh temporary directory, removed when the simulator stops.
        public var caCertificateOutputPath: String? = nil
        /// CA certificates (PEM) whose client certificates the simulator accepts. When set, a
        /// client certificate is required at the TLS level, unless `tokenKeys` is also set (then a
        /// connection may present a certificate or use provider tokens).
        public var clientCertificateAuthorityPEM: String? = nil
        /// Provider-token keys. When set, connections without a client certificate must send
        /// `authorization: bearer <JWT>`. With neither this nor a client CA, no credentials are checked.
        public var tokenKeys: [ProviderTokenKey] = []
        /// `SETTINGS_MAX_CONCURRENT_STREAMS` sent to new connections (a fault can override it).
        public var maxConcurrentStreams: Int = 1000
        public var handling: NotificationHandling = .validating
        public var environment: Environment = .development
        /// Accepted notifications kept in full; beyond it only counters move.
        public var recordLimit: Int = 10_000
        /// Count deliveries and duplicates per device (turn off for very large benchmarks).
        public var tracksDevices: Bool = true
        /// The wall clock for token ages, arrival times and 410 timestamps.
        public var clock: any SimulatorClock = SystemSimulatorClock()
        /// Event loop threads of the simulator's own group.
        public var eventLoopThreads: Int = 1
        /// Faults in force from the start (and restored by reset).
        public var faults: SimulatorFaults = .none
        /// Seed of the generator that draws the error-rate faults (nil = random).
        public var faultSeed: UInt64? = nil
        public var logger: Logger = Logger(label: "pushgate.simulator")

        public init() {}

        func validate() throws {
            func fail(_ key: String, _ problem: String) -> SimulatorError {
                .invalidConfiguration(key: key, problem: problem)
            }
            guard (0...65_535).contains(self.port) else { throw fail("port", "must be 0...65535") }
            if let control = self.controlPort, !(0...65_535).contains(control) {
                throw fail("controlPort", "must be 0...65535")
            }
            if let legacy = self.legacyPort, !(0...65_535).contains(legacy) {
                throw fail("legacyPort", "must be 0...65535")
            }
            if let feedback = self.feedbackPort, !(0...65_535).contains(feedback) {
                throw fail("feedbackPort", "must be 0...65535")
            }
            guard (0...Int(Int32.max)).contains(self.maxConcurrentStreams) else {
                throw fail("maxConcurrentStreams", "must be 0...2^31-1")
            }
            guard self.recordLimit >= 0 else { throw fail("recordLimit", "must be ≥ 0") }
            guard self.eventLoopThreads >= 1 else { throw fail("eventLoopThreads", "must be ≥ 1") }
            var seen = Set<String>()
            for key in self.tokenKeys {
                guard !key.keyID.isEmpty, !key.teamID.isEmpty else {
                    throw fail("tokenKeys", "key ID and team ID must not be empty")
                }
                guard seen.insert(key.keyID).inserted else {
                    throw fail("tokenKeys", "key ID \(key.keyID) appears twice")
                }
            }
            do {
                _ = try self.faults.validated()
            } catch let error as SimulatorError {
                throw fail("faults", error.description)
            }
        }
    }
}
