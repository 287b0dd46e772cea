import Foundation
import PushgateCore

extension PostgresStore {
    /// Where the store's database is and how to use it. Validated by ``PostgresStore/init(configuration:logger:)``'s
    /// callers through ``validate()``; build one from a URL with ``init(url:)``.
    public struct Configuration: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
        public var host: String
        public var port: Int = 5432
        public var username: String
        /// Never logged (``redactedURL`` shows `***`).
        public var password: String?
        public var database: String
        /// The schema holding pushgate's tables, created if missing: several deployments (or test runs)
        /// may share one database. A plain lower-case SQL identifier.
        public var schema: String = "public"
        /// Connections to the server at most: the dispatcher, the ingresses and the HTTP API share them
        /// (plus one held by the work listener).
        public var maximumConnections: Int = 8
        /// Listen for other instances' `NOTIFY` to wake this instance's dispatcher (see
        /// ``PostgresStore/onWorkAvailable(_:)``). Holds one connection.
        public var listensForWork: Bool = true
        /// TLS to the server: ``TLSMode/default(host:)`` unless the URL's `sslmode` says otherwise.
        public var tlsMode: TLSMode
        /// How long one query may wait for the server before its connection is closed and the call fails
        /// with a (transient) ``StoreError``: a server that went silent (a network dropping packets) must not
        /// hold a store call, its connection and the dispatcher for ever. Keep it well above the longest
        /// legitimate query (a large batch registration is one statement); nil: no deadline. URL parameter
        /// `query_timeout` (seconds, `0` for none).
        public var queryTimeout: Duration? = PostgresStore.defaultQueryTimeout
        /// Called with the SQL of every statement the store sends (transaction control included: each is a
        /// round trip). Tests count statements per operation with it; nil (the default) costs nothing.
        package var statementObserver: (@Sendable (String) -> Void)?

        /// Whether the connection is encrypted.
        public var requiresTLS: Bool { tlsMode != .disable }

        public init(host: String, port: Int = 5432, username: String, password: String?, database: String) {
            self.host = host
            self.port = port
            self.username = username
            self.password = password
            self.database = database
            self.tlsMode = .default(host: host)
        }

        /// Parses `postgres://user[:password]@host[:port]/database[?PARAMETERS]`, the parameters
        /// `schema=NAME`, `sslmode=MODE`, `sslrootcert=FILE`, `query_timeout=SECONDS` (see ``queryTimeout``),
        /// `MODE` one of `disable`, `require`, `verify-full` (see ``TLSMode``)
        /// (`postgresql://` too). Throws ``StoreError/Code/invalidArgument`` naming what is wrong
        /// (the message never contains the password).
        public init(url: String) throws {
            guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased() else {
                throw StoreError.invalidArgument("not a URL (expected postgres://user@host:port/database)")
            }
            guard scheme == "postgres" || scheme == "postgresql" else {
                throw StoreError.invalidArgument("scheme \"\(scheme)\" is not postgres:// or postgresql://")
            }
            guard let host = components.host, !host.isEmpty else {
                throw StoreError.invalidArgument("the URL names no host (expected postgres://user@host:port/database)")
            }
            guard let user = components.user, !user.isEmpty else {
                throw StoreError.invalidArgument("the URL names no user (expected postgres://user@host:port/database)")
            }
            let database = String(components.path.drop(while: { $0 == "/" }))
            guard !database.isEmpty, !database.contains("/") else {
                throw StoreError.invalidArgument(
                    "the URL names no database (expected postgres://user@host:port/database)"
                )
            }
            if let port = components.port, !(1...65535).contains(port) {
                throw StoreError.invalidArgument("port \(port) is out of range")
            }
            self.init(
                host: host,
                port: components.port ?? 5432,
                username: user.removingPercentEncoding ?? user,
                password: components.password.map { $0.removingPercentEncoding ?? $0 },
                database: database.removingPercentEncoding ?? database
            )
            var sslmode: String?
            var sslrootcert: String?
            for item in components.queryItems ?? [] {
                switch item.name {
                case "schema":
                    schema = item.value ?? ""
                case "sslmode":
                    sslmode = item.value ?? ""
                case "sslrootcert":
                    sslrootcert = item.value ?? ""
                case "query_timeout":
                    queryTimeout = try Self.queryTimeout(parsing: item.value ?? "")
                default:
                    throw StoreError.invalidArgument(
                        "unknown URL parameter \"\(item.name)\" (known: schema, sslmode, sslrootcert, query_timeout)"
                    )
                }
            }
            tlsMode = try TLSMode.parse(sslmode: sslmode, sslrootcert: sslrootcert, host: host)
            try validate()
        }

        /// Checks what the server cannot: the schema name (it is written into SQL) and the limits.
        public func validate() throws {
            guard !schema.isEmpty, schema.utf8.count <= 63,
                schema.utf8.allSatisfy({
                    ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z"))
                        || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || $0 == UInt8(ascii: "_")
                }),
                !(schema.utf8.first.map { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") } ?? true)
            else {
                throw StoreError.invalidArgument(
                    "schema \"\(schema.prefix(64))\" must be 1 to 63 characters of a-z, 0-9 and _, not starting with a digit"
                )
            }
            guard maximumConnections >= 2 else {
                throw StoreError.invalidArgument("maximumConnections must be at least 2 (got \(maximumConnections))")
            }
        }

        /// `query_timeout`: whole or decimal seconds, at least 0.1 (a deadline shorter than a round trip
        /// would fail every query), or `0` for none.
        static func queryTimeout(parsing text: String) throws -> Duration? {
            guard let seconds = Double(text), seconds.isFinite, seconds == 0 || seconds >= 0.1 else {
                throw StoreError.invalidArgument(
                    "query_timeout \"\(text.prefix(32))\" must be a number of seconds, at least 0.1, or 0 for none"
                )
            }
            return seconds == 0 ? nil : .milliseconds(Int64((seconds * 1000).rounded()))
        }

        /// The URL with the password replaced by `***`: what may be logged.
        public var redactedURL: String {
            let credentials = password == nil ? username : "\(username):***"
            let query = schema == "public" ? "" : "?schema=\(schema)"
            return "postgres://\(credentials)@\(host):\(port)/\(database)\(query)"
        }

        public var description: String { redactedURL }
        public var debugDescription: String { redactedURL }
        /// `dump` and debuggers show the redacted URL too, never the password.
        public var customMirror: Mirror { Mirror(self, children: ["url": redactedURL]) }

        /// The `NOTIFY` channel of this schema: instances of another deployment sharing the database
        /// are not woken (channel names are cut at 63 bytes, so two very long schema names may share one:
        /// a spurious wake-up costs one look at the ledger).
        var notificationChannel: String { String("pushgate_\(schema)".prefix(63)) }
    }
}

extension PostgresStore {
    /// Devices per chunk when several instances share the work (the gateway's default with `--store`).
    ///
    /// A 1M-device broadcast becomes 100 chunks: enough for three or more instances to share evenly (at
    /// the end, one instance finishes at most one chunk, about 0.1 to 0.3 s of sending, after the others),
    /// and few enough that claiming costs nothing next to sending (one short transaction per 10,000
    /// devices, reading 10,000 index entries). Duplicates after a crash do not grow with it: they are
    /// bounded by the dispatcher's in-flight and unrecorded outcomes, since progress inside a chunk is
    /// recorded every 100 ms.
    public static let defaultChunkSize = 10_000

    /// How long a chunk stays with an instance that stopped renewing it (the gateway's default with
    /// `--store`): after a crash, another instance resumes its chunks within this time. Holders renew
    /// with every progress record (10 per second while sending) and at least every third of it while
    /// waiting, so only a stall of the whole process or of its database connection for 30 s hands a
    /// live instance's chunk to another (which then sends at most its unrecorded window again).
    public static let defaultLeaseDuration: Duration = .seconds(30)

    /// How long a store query may wait for the server by default (``Configuration/queryTimeout``): far
    /// above a normal query (milliseconds), and as long as the default lease, so that an instance whose
    /// database went silent gives up on it about when other instances may take its work over.
    public static let defaultQueryTimeout: Duration = .seconds(30)
}
