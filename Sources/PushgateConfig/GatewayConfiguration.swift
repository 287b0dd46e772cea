public import PushgateCore

/// Everything the daemon is configured with, as read from flags, environment and file (see
/// ``ConfigurationLoader``), before any file named in it is opened. Defaults inline; the keys are
/// listed in `docs/configuration.md`.
public struct GatewayConfiguration: Sendable, Hashable {
    /// `listen`: the UDP listen host (the C pushd's `-l`); also the HTTP API's address when API keys exist
    /// and `http.host` is not set.
    public var listen: String = "localhost"
    public var udp = UDP()
    public var http = HTTP()
    public var store = Store()
    /// `instanceId`: this process's name in the ledger's work leases. nil: chosen by the store, `local`
    /// with SQLite (one file, one process) and a name unique to the process with PostgreSQL.
    public var instanceID: String? = nil
    /// `logLevel`: trace, debug, info, notice, warning, error, critical.
    public var logLevel: String = "info"
    /// `logFormat`: `text` (one readable line an event) or `json` (one JSON object a line, same fields).
    public var logFormat: String = "text"
    /// `shutdown.timeout` (seconds): how long a stop (SIGTERM) may wait for what is under way (a store
    /// that is out, answers in flight) before the rest is cancelled.
    public var shutdownTimeoutSeconds: Int = 30
    /// `apiKeys` (names) and `apiKey.NAME.*`.
    public var apiKeys: [APIKeyEntry] = []
    /// `apps` (names) and `app.NAME.*`, in the order listed.
    public var apps: [App] = []
    /// The flag that set a key (`-c` for `app.default.certificate.file`), so that a problem names what
    /// the operator typed.
    public var flagNames: [String: String] = [:]
    /// `misconfiguration.*`: when most of an app's answers refuse its device tokens (a wrong environment,
    /// topic or Firebase project), its devices are held and kept instead of invalidated.
    public var misconfiguration = Misconfiguration()
    /// `dispatch.inFlightWindow`: hold a broadcast's sends to the dispatcher's in-flight window (its
    /// round trip kept near the lowest seen). On by default; `false` sends as before the window.
    public var dispatchInFlightWindow: Bool = true

    public init() {}

    /// The thresholds of the configuration alarm (see `MisconfigurationBreaker` in PushgateCore).
    public struct Misconfiguration: Sendable, Hashable {
        /// `misconfiguration.enabled`: false invalidates on every `BadDeviceToken`, whatever the share.
        public var enabled: Bool = true
        /// `misconfiguration.window`: seconds; the sample that trips lies within it.
        public var windowSeconds: Int = 60
        /// `misconfiguration.minimumAnswers`: the sample's size (fewer answers within the window never trip).
        public var minimumAnswers: Int = 100
        /// `misconfiguration.share`: trips when more than this share of the sample is suspect.
        public var share: Double = 0.5
        /// `misconfiguration.probeAfter`: seconds of holding before the first probe.
        public var probeAfterSeconds: Int = 30
        /// `misconfiguration.probeLimit`: the longest hold between probes, in seconds.
        public var probeLimitSeconds: Int = 600
        /// `misconfiguration.probeAnswers`: notifications a probe sends.
        public var probeAnswers: Int = 10
        public init() {}
    }

    public struct UDP: Sendable, Hashable {
        /// `udp.registrationPort` (`-g`); 0 picks a free port.
        public var registrationPort: Int = 7734
        /// `udp.notificationPort` (`-n`); 0 picks a free port.
        public var notificationPort: Int = 7874
        /// The receive buffer each UDP socket asks for (no key). The kernel charges ~830 bytes per small
        /// datagram: 64 MiB (128 MiB granted, forced when root) holds a 100,000-registration burst even
        /// while a debug build writes slowly.
        public var receiveBufferBytes: Int = 64 << 20
        /// `udp.allow`: the senders the UDP ports accept, as CIDR ranges (IPv4 and IPv6). nil: loopback only
        /// when `listen` is a loopback address, every sender otherwise (``effectiveAllow(listen:)``).
        public var allow: [CIDRRange]? = nil
        public init() {}

        /// The ranges the UDP ports accept; nil: every sender.
        public func effectiveAllow(listen: String) -> [CIDRRange]? {
            allow ?? (GatewayConfiguration.isLoopback(listen) ? CIDRRange.loopback : nil)
        }
    }

    public struct HTTP: Sendable, Hashable {
        /// `http.port`; 0 picks a free one, -1 turns the API off.
        public var port: Int = 7880
        /// `http.host`. nil: `listen` when API keys exist, else 127.0.0.1 (without keys the API serves
        /// loopback only).
        public var host: String? = nil
        /// `http.tls.*`: serve the API over TLS (nil: plain HTTP).
        public var tls: TLS? = nil
        public init() {}

        /// The API's certificate and key, and the CA its clients' certificates must chain to (mTLS). The
        /// files are read at start-up and again on SIGHUP.
        public struct TLS: Sendable, Hashable {
            /// `http.tls.certificate`: the certificate chain (PEM), leaf first.
            public var certificate: String
            /// `http.tls.key`: its private key (unencrypted PEM).
            public var key: String
            /// `http.tls.clientCA`: CA certificates (PEM); when set, every client must present a
            /// certificate that chains to one of them (the handshake fails without one).
            public var clientCA: String? = nil

            public init(certificate: String, key: String, clientCA: String? = nil) {
                self.certificate = certificate
                self.key = key
                self.clientCA = clientCA
            }
        }

        /// Where the API binds, given whether API keys exist.
        public func effectiveHost(listen: String, hasKeys: Bool) -> String {
            if let host { return host }
            // The API binds one address; `localhost` (the default listen host) means the IPv4 loopback,
            // where it always was, rather than whichever address the resolver lists first.
            return hasKeys && listen != "localhost" ? listen : "127.0.0.1"
        }
    }

    public struct Store: Sendable, Hashable {
        /// `store.path` (`-d`): the SQLite database.
        public var path: String = "pushgate.db"
        /// `store.url` (`--store`): a `postgres://` URL; when set it replaces the SQLite file.
        public var url: String? = nil
        /// `--store-password-file` (no key): PostgreSQL's password is this file's first line. nil: the
        /// `PUSHGATE_STORE_PASSWORD` environment variable, else the URL's.
        public var passwordFile: String? = nil
        /// `--chunk-size` (no key): devices per unit of work an instance claims. nil: the store's default
        /// (20,000; 10,000 with PostgreSQL).
        public var chunkSize: Int? = nil
        /// `--lease` (no key): how long a claimed unit of work stays with an instance that stopped renewing
        /// it. nil: the store's default (60 s; 30 s with PostgreSQL).
        public var lease: Duration? = nil
        /// `store.minimumFreeBytes`: below this much free space on the SQLite database's volume the gateway
        /// warns and `/readyz` answers 503 `disk_low`. nil: the store's default (32 MiB).
        public var minimumFreeBytes: Int64? = nil
        /// `store.retention`: how long a finished request (its report, failures and idempotency key) is
        /// kept before it is deleted; 0 (`off`) keeps every request for ever. Written `7d`, `36h`, `90m`
        /// or in seconds. At least ``minimumRetentionSeconds``.
        public var retentionSeconds: Int = 7 * 24 * 60 * 60
        public init() {}

        /// The shortest retention: a day, the idempotency keys' window (`IdempotencyKey.window`), so that a
        /// client's retry within the window never finds its request deleted and sends it again.
        public static let minimumRetentionSeconds = 24 * 60 * 60

        /// The shortest lease: work held renews its lease before half of it is gone.
        public static let minimumLease: Duration = .seconds(3)
    }

    /// One bearer API key of the HTTP API.
    public struct APIKeyEntry: Sendable, Hashable {
        public enum Source: Sendable, Hashable {
            /// `apiKey.NAME.hash`: `sha256:` and 64 hex digits, the hash of the key.
            case hash(String)
            /// `apiKey.NAME.file`: a file of keys, one per line (blank lines and `#` comments skipped).
            case file(String)
        }
        public var name: String
        public var source: Source
        /// `apiKey.NAME.app`: the only app the key may act on (nil: every app).
        public var app: String?

        public init(name: String, source: Source, app: String? = nil) {
            self.name = name
            self.source = source
            self.app = app
        }
    }

    /// One app: its APNs credentials, topic, environment and connection pool. Apps never share a
    /// connection; token apps of one team and key share one provider token.
    public struct App: Sendable, Hashable {
        public enum Authentication: Sendable, Hashable {
            /// `certificate.file` (PEM) and `certificate.key` (PEM; nil when the certificate file holds it).
            case certificate(file: String, key: String?)
            /// `certificate.p12` with the passphrase in the environment variable `certificate.passphraseEnv`.
            case pkcs12(file: String, passphraseEnvironment: String?)
            /// `token.keyFile` (`.p8`), `token.keyId`, `token.teamId`.
            case token(keyFile: String, keyID: String, teamID: String)
        }

        public enum Transport: String, Sendable, Hashable, CaseIterable {
            case http2
            case legacy
        }

        public struct Pool: Sendable, Hashable {
            /// `pool.maxConnections` (`--max-connections`): 16 x APNs's 1,000 streams carry 100,000/s up to
            /// a 160 ms round trip.
            public var maximumConnections: Int = 16
            /// `pool.maxStreams` (`--max-streams`): a cap on streams per connection; nil: as many as the
            /// server's SETTINGS_MAX_CONCURRENT_STREAMS allows (1,000 at APNs).
            public var maximumStreams: Int? = nil
            /// `pool.rate` (`-r`): notifications per second per connection; 0 means no limit.
            public var rate: Int = 0
            /// `pool.pingMinutes` (`-t`); 0 turns pings off.
            public var pingMinutes: Int = 60
            /// `pool.idleHours` (`-i`); 0 keeps idle connections open.
            public var idleHours: Int = 24
            public init() {}
        }

        /// The binary interface's hosts (`transport: legacy`), each `HOST:PORT`.
        public struct Legacy: Sendable, Hashable {
            /// `legacy.host`; nil: Apple's gateway host of the environment, port 2195.
            public var host: String? = nil
            /// `legacy.feedbackHost`; nil: Apple's feedback host of the environment, port 2196.
            public var feedbackHost: String? = nil
            /// `legacy.feedbackInterval`: seconds between feedback polls; 0 turns polling off.
            public var feedbackIntervalSeconds: Int = 3600
            public init() {}

            public func gatewayHost(_ environment: APNsEnvironment) -> String {
                host
                    ?? (environment == .sandbox ? "gateway.sandbox.push.apple.com:2195" : "gateway.push.apple.com:2195")
            }
            public func feedbackHost(_ environment: APNsEnvironment) -> String {
                feedbackHost
                    ?? (environment == .sandbox
                        ? "feedback.sandbox.push.apple.com:2196" : "feedback.push.apple.com:2196")
            }
        }

        /// The app's Firebase Cloud Messaging route (`fcm.*`), beside its APNs one.
        public struct FCM: Sendable, Hashable {
            /// `fcm.serviceAccount` (`--fcm-service-account`): the service-account JSON key file.
            public var serviceAccountFile: String
            /// `fcm.host` (`--fcm-host`): `HOST[:PORT]` of `messages:send` (a simulator); nil: Google's,
            /// fcm.googleapis.com:443.
            public var host: String? = nil
            /// `fcm.tokenUri` (`--fcm-token-uri`): where access tokens are fetched, an https URL; nil: the
            /// account file's `token_uri`.
            public var tokenURI: String? = nil
            /// `fcm.ca` (`--fcm-ca`): trust this CA file (PEM) for the FCM host and the token endpoint
            /// instead of the system store. Separate from `ca`, which is APNs's.
            public var caFile: String? = nil
            /// `fcm.pool.maxConnections`: the most HTTP/2 connections to FCM.
            public var maximumConnections: Int = 16
            /// `fcm.pool.maxStreams`: a cap on streams per connection; nil: what the server's SETTINGS allow.
            public var maximumStreams: Int? = nil

            public init(serviceAccountFile: String) {
                self.serviceAccountFile = serviceAccountFile
            }
        }

        /// The app's Web Push route (`webpush.*`): its VAPID key pair and contact, and the pool's caps.
        public struct WebPush: Sendable, Hashable {
            /// `webpush.vapidKey`: the VAPID private key, a PEM P-256 file (`pushgate webpush
            /// generate-vapid-key`); its public key is the web page's `applicationServerKey`.
            public var vapidKeyFile: String
            /// `webpush.subject`: the VAPID `sub`, a `mailto:` address or an `https:` URL the push services
            /// may contact.
            public var subject: String
            /// `webpush.ca`: trust this CA file (PEM) for the push services instead of the system store
            /// (a simulator).
            public var caFile: String? = nil
            /// `webpush.pool.maxConnectionsPerOrigin`: connections to one push service at most.
            public var maximumConnectionsPerOrigin: Int = 8
            /// `webpush.pool.maxConnections`: connections over every push service at most.
            public var maximumConnections: Int = 256

            public init(vapidKeyFile: String, subject: String) {
                self.vapidKeyFile = vapidKeyFile
                self.subject = subject
            }
        }

        public var name: String
        /// `topic`: the bundle id (apns-topic). nil: the certificate subject's UID.
        public var topic: String? = nil
        /// `environment` (`-s` for sandbox).
        public var environment: APNsEnvironment = .production
        /// `alternativePort` (`-p`): port 2197 instead of 443.
        public var alternativePort: Bool = false
        /// `apnsHost`: `HOST:PORT` instead of Apple (a simulator, a proxy).
        public var apnsHost: String? = nil
        /// `ca`: trust this CA file (PEM) for the server instead of the system store.
        public var caFile: String? = nil
        /// nil only before defaults are applied: ``ConfigurationLoader`` fills in pushd's
        /// `pushd.crt`/`pushd.key` for a single app that names no credentials.
        public var authentication: Authentication?
        public var pool = Pool()
        /// `transport`: http2 (default) or legacy (the binary interface).
        public var transport: Transport = .http2
        public var legacy = Legacy()
        /// `fcm.*`: FCM credentials and endpoint; nil: the app has no FCM route (its FCM devices fail with
        /// a recorded reason). An app always has APNs credentials too: FCM-only apps are not supported.
        public var fcm: FCM? = nil
        /// `webpush.*`: VAPID key and subject; nil: the app has no Web Push route (its browsers fail with
        /// `webpush_not_configured`). Like FCM, beside APNs credentials.
        public var webPush: WebPush? = nil

        public init(name: String, authentication: Authentication? = nil) {
            self.name = name
            self.authentication = authentication
        }
    }
}

/// A configuration value the gateway cannot start with: one line naming the key and the problem.
/// Never carries a secret (keys, passphrases), only names and paths.
public struct ConfigurationProblem: Error, Hashable, Sendable, CustomStringConvertible {
    /// The configuration key at fault (`app.news.token.keyId`), or the flag when it came from one.
    public let key: String
    public let message: String

    public init(key: String, _ message: String) {
        self.key = key
        self.message = message
    }

    public var description: String { "\(key): \(message)" }
}
