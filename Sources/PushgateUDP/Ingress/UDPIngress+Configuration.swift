public import PushgateCore

extension UDPIngress {
    /// How the UDP listener binds and batches. The defaults are the C pushd's ports and address, with a
    /// far larger receive buffer (pushd's 8 KiB dropped 80-98 % of a burst).
    public struct Configuration: Hashable, Sendable {
        /// The listen host (`-l`): the listener binds every address it resolves to (IPv4 and IPv6), like
        /// the C pushd. A numeric address binds just that address.
        public var host: String = "localhost"
        /// The registration port (`-g`); 0 picks a free port (see ``UDPIngress/boundAddresses()``).
        public var registrationPort: Int = 7734
        /// The notification port (`-n`); 0 picks a free port.
        public var notificationPort: Int = 7874
        /// `SO_RCVBUF` requested for each socket: room in the kernel for a burst while a batch is being
        /// written. Linux caps it at `net.core.rmem_max` unless the process may use `SO_RCVBUFFORCE`
        /// (root); what was granted is logged.
        public var receiveBufferBytes: Int = 32 << 20
        /// The read buffer for one datagram. A datagram that fills it may have been truncated and is
        /// rejected (`datagram_too_large`); 65,536 holds any UDP datagram over IPv4 or IPv6.
        public var maximumDatagramBytes: Int = 65_536
        /// Datagrams read per system call (`recvmmsg` on Linux; 1 reads them one by one). Each one gets
        /// a `maximumDatagramBytes` slice of one read buffer that is reused from read to read.
        public var datagramsPerSystemCall: Int = 16
        /// System calls per socket wake-up before what was read is handed to the writer.
        public var messagesPerRead: Int = 8
        /// The most registrations written in one transaction. Larger batches share the index pages they
        /// dirty and the commit's cost (a registry of millions: about one random index page per new
        /// token; at 5,000,000 devices a batch of 20,000 dirties about 0.93 page per registration, one
        /// of 50,000 about 0.83, and fewer commits leave more for each checkpoint to share). A batch is
        /// only this large when the writer falls behind: it takes whatever arrived during the last one.
        public var registrationBatchLimit: Int = 50_000
        /// Registrations parsed and waiting for the writer beyond which the sockets are not read (the
        /// kernel buffer holds the rest) until a batch is taken: the next batch and a little more. With
        /// the batch being written, at most 110,000 parsed registrations are in memory (about 20 MiB).
        public var pendingRegistrationLimit: Int = 60_000
        /// Registrations kept while the store is out (every write of a batch failed with a transient error):
        /// they are applied when it is back; the sockets are read on meanwhile, and a registration beyond
        /// this many is dropped, counted (`store_outage_overflow`) and logged at most once a second.
        /// 200,000 parsed registrations are about 40 MiB.
        public var outageRegistrationLimit: Int = 200_000
        /// The same for notification requests (each is submitted on its own transaction).
        public var pendingNotificationLimit: Int = 1_000
        /// The delays between attempts to store a notification request after a transient store error
        /// (`StoreFailureKind`); it is retried until stored, with the sockets unread meanwhile.
        public var storeRetryBackoff = Backoff(base: .milliseconds(100), multiplier: 2, cap: .seconds(5))
        /// `udp.allow`: the senders whose datagrams are read; a datagram from any other address is refused
        /// before it is parsed (counted, and logged at most once a second). nil: every sender. The ports
        /// are unauthenticated by design (pushd's interface), so this and the listen address are what
        /// keep strangers out.
        public var allowedSenders: [CIDRRange]? = nil

        public init(
            host: String = "localhost",
            registrationPort: Int = 7734,
            notificationPort: Int = 7874
        ) {
            self.host = host
            self.registrationPort = registrationPort
            self.notificationPort = notificationPort
        }

        /// Checks every setting; the error names the first bad one.
        public func validate() throws(UDPIngressError) {
            func check(_ ok: Bool, _ key: String, _ rule: String) throws(UDPIngressError) {
                if !ok { throw .invalidConfiguration(key: key, message: "\(key) \(rule)") }
            }
            try check(!host.isEmpty, "host", "must not be empty")
            try check((0...65_535).contains(registrationPort), "registrationPort", "must be 0 to 65535")
            try check((0...65_535).contains(notificationPort), "notificationPort", "must be 0 to 65535")
            try check(
                registrationPort == 0 || registrationPort != notificationPort,
                "notificationPort",
                "must differ from registrationPort"
            )
            try check(receiveBufferBytes > 0, "receiveBufferBytes", "must be positive")
            try check(
                (1_024...(1 << 20)).contains(maximumDatagramBytes),
                "maximumDatagramBytes",
                "must be 1024 to 1048576"
            )
            try check((1...1_024).contains(messagesPerRead), "messagesPerRead", "must be 1 to 1024")
            try check((1...64).contains(datagramsPerSystemCall), "datagramsPerSystemCall", "must be 1 to 64")
            try check(registrationBatchLimit > 0, "registrationBatchLimit", "must be positive")
            try check(pendingRegistrationLimit > 0, "pendingRegistrationLimit", "must be positive")
            try check(pendingNotificationLimit > 0, "pendingNotificationLimit", "must be positive")
            try check(allowedSenders.map { !$0.isEmpty } ?? true, "allowedSenders", "must name at least one range")
        }
    }
}

/// Why the UDP listener could not start.
public struct UDPIngressError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Code: Hashable, Sendable {
        case invalidConfiguration(key: String)
        case unresolvableHost
        case bindFailed
    }

    private let code: Code
    public let message: String

    public static func invalidConfiguration(key: String, message: String) -> Self {
        Self(code: .invalidConfiguration(key: key), message: message)
    }

    public static func unresolvableHost(_ host: String, detail: String) -> Self {
        Self(code: .unresolvableHost, message: "cannot resolve listen host \"\(host)\": \(detail)")
    }

    public static func bindFailed(_ address: String, detail: String) -> Self {
        Self(code: .bindFailed, message: "cannot bind UDP \(address): \(detail)")
    }

    /// The configuration key at fault, for an invalid configuration.
    public var key: String? {
        if case .invalidConfiguration(let key) = code { return key }
        return nil
    }

    public var description: String { message }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
