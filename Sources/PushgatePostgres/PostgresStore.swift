import Foundation
public import Logging
import NIOCore
import PostgresNIO
public import PushgateCore
public import ServiceLifecycle
import Synchronization

/// The store for several gateway instances: one PostgreSQL database holds the registry and the ledger,
/// and the instances share the work through it (see ``DeliveryLedger`` for the contract and the
/// PostgreSQL notes there; `PostgresSchema` for the tables; docs/postgres.md for the design).
///
/// A `Service`: ``run()`` runs the connection pool, applies pending migrations (one instance at a time),
/// and listens for other instances' `NOTIFY`. Store calls made before the migrations are done wait for
/// them; if they fail, every call fails with the migration's error.
///
/// Every operation is one transaction. Claims skip rows other instances hold (`FOR UPDATE SKIP LOCKED`);
/// writes that contend (a deadlock, a serialization failure) are retried a few times.
public final class PostgresStore: PushStore, Service {
    public let configuration: Configuration
    let client: PostgresClient
    let logger: Logger
    private let readiness = Mutex<Readiness>(.starting([]))
    private let deadlocks = Atomic<Int>(0)

    /// Transactions PostgreSQL aborted as deadlocks (SQLSTATE 40P01) and that ran again. One lock order
    /// (request, then its chunks or retries) keeps it at 0; tests check that.
    package var deadlocksRetried: Int { deadlocks.load(ordering: .relaxed) }
    private let wakeHandlers = Mutex<[@Sendable () -> Void]>([])
    private let keepalive = ConnectionKeepalive()

    private enum Readiness {
        case starting([CheckedContinuation<Void, any Error>])
        case ready
        case failed(StoreError)
    }

    /// Creates the store; nothing connects before ``run()``.
    public init(configuration: Configuration, logger: Logger = Logger(label: "pushgate.store")) throws {
        try configuration.validate()
        var postgres = PostgresClient.Configuration(
            host: configuration.host,
            port: configuration.port,
            username: configuration.username,
            password: configuration.password,
            database: configuration.database,
            tls: configuration.tlsMode.clientConfiguration().map { .require($0) } ?? .disable
        )
        postgres.options.maximumConnections = configuration.maximumConnections
        // No keep-alive queries: the pool runs them without a deadline, and one written to a dead
        // connection (a black hole) would hold that connection for ever, as busy. Idle connections are
        // closed after a minute anyway; a dead one leased before that fails at its query's deadline
        // (`PostgresConnection.collect`) and is replaced, and TCP keepalive finds dead idle sockets.
        postgres.options.keepAliveBehavior = nil
        // Every connection resolves table names in the configured schema.
        postgres.options.additionalStartupParameters = [
            ("search_path", configuration.schema), ("application_name", "pushgate"),
        ]
        self.configuration = configuration
        self.logger = logger
        self.client = PostgresClient(configuration: postgres, backgroundLogger: logger)
    }

    /// Runs the connection pool, migrates, then listens for work until a graceful shutdown or
    /// cancellation. Throws if the schema cannot be brought up to date.
    public func run() async throws {
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await self.client.run() }
            do {
                try await migrate()
            } catch {
                let failure = Self.storeError(error)
                logger.error(
                    "cannot prepare the PostgreSQL schema",
                    metadata: ["store.url": "\(configuration.redactedURL)", "store.error": "\(failure.message)"]
                )
                finishStarting(.failed(failure))
                group.cancelAll()
                throw failure
            }
            finishStarting(.ready)
            if configuration.listensForWork {
                group.addTask { await self.listenForWork() }
            }
            try? await gracefulShutdown()
            group.cancelAll()
        }
        finishStarting(.failed(StoreError.backend("the PostgreSQL store has stopped")))
    }

    /// Runs `body` with a running store (migrated), stopping it when `body` returns or throws. For tools
    /// and tests; the gateway runs the store as a service of its `ServiceGroup`.
    public static func withStore<Result: Sendable>(
        configuration: Configuration,
        logger: Logger = Logger(label: "pushgate.store"),
        _ body: @Sendable (PostgresStore) async throws -> Result
    ) async throws -> Result {
        let store = try PostgresStore(configuration: configuration, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await store.run() }
            do {
                try await store.ready()
                let result = try await body(store)
                group.cancelAll()
                try? await group.waitForAll()
                return result
            } catch {
                group.cancelAll()
                // The store's own failure (a migration) explains more than "stopped".
                if let first = try? await group.next() { _ = first }
                throw error
            }
        }
    }

    /// Calls `handler` whenever another instance (or this one) enqueued work, rescheduled a retry or
    /// released leases, as told by `NOTIFY`; also once each time the listener (re)connects, for what it may
    /// have missed. The handler must be quick (wake a dispatcher).
    public func onWorkAvailable(_ handler: @escaping @Sendable () -> Void) {
        wakeHandlers.withLock { $0.append(handler) }
    }

    // MARK: Readiness

    /// Waits until the schema is migrated; throws what the migration threw.
    func ready() async throws {
        let immediate: Result<Void, StoreError>? = readiness.withLock { state in
            switch state {
            case .ready: .success(())
            case .failed(let error): .failure(error)
            case .starting: nil
            }
        }
        if let immediate { return try immediate.get() }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let outcome: Result<Void, StoreError>? = readiness.withLock { state in
                switch state {
                case .ready: return .success(())
                case .failed(let error): return .failure(error)
                case .starting(var waiting):
                    waiting.append(continuation)
                    state = .starting(waiting)
                    return nil
                }
            }
            if let outcome { continuation.resume(with: outcome.mapError { $0 as any Error }) }
        }
    }

    private func finishStarting(_ outcome: Readiness) {
        let waiting: [CheckedContinuation<Void, any Error>] = readiness.withLock { state in
            guard case .starting(let waiting) = state else {
                if case .failed = outcome { state = outcome }
                return []
            }
            state = outcome
            return waiting
        }
        for continuation in waiting {
            switch outcome {
            case .failed(let error): continuation.resume(throwing: error)
            default: continuation.resume()
            }
        }
    }

    // MARK: Migrations

    /// Applies pending migrations under an advisory lock, so that instances starting together take turns;
    /// each migration is recorded with the time and the server process that applied it.
    ///
    /// On a connection of its own rather than the pool's: a refused login (wrong password, unknown
    /// database) then fails at once with the server's reason, where the pool would retry until its
    /// circuit breaker gives up with no reason.
    private func migrate() async throws {
        var connectionConfiguration = PostgresConnection.Configuration(
            host: configuration.host,
            port: configuration.port,
            username: configuration.username,
            password: configuration.password,
            database: configuration.database,
            tls: try configuration.tlsMode.clientConfiguration().map { .require(try NIOSSLContext(configuration: $0)) }
                ?? .disable
        )
        connectionConfiguration.options.additionalStartupParameters = [
            ("search_path", configuration.schema), ("application_name", "pushgate"),
        ]
        let connection = try await PostgresConnection.connect(
            configuration: connectionConfiguration,
            id: 0,
            logger: logger
        )
        do {
            try await migrate(on: connection)
            try? await connection.close()
        } catch {
            try? await connection.close()
            throw error
        }
    }

    private func migrate(on connection: PostgresConnection) async throws {
        let schema = configuration.schema
        do {
            try await connection.query("BEGIN", logger: logger)
            do {
                // One lock per schema: the key is the schema's hash, in pushgate's own lock namespace.
                try await connection.query(
                    "SELECT pg_advisory_xact_lock(\(Self.migrationLockNamespace), hashtext(\(schema)))",
                    logger: logger
                )
                try await connection.query(
                    PostgresQuery(unsafeSQL: "CREATE SCHEMA IF NOT EXISTS \(schema)"),
                    logger: logger
                )
                try await connection.query(
                    """
                    CREATE TABLE IF NOT EXISTS pushgate_migration (
                        version INTEGER PRIMARY KEY,
                        name TEXT NOT NULL,
                        applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
                        applied_by_pid INTEGER NOT NULL DEFAULT pg_backend_pid()
                    )
                    """,
                    logger: logger
                )
                var current = 0
                for try await version in try await connection.query(
                    "SELECT COALESCE(MAX(version), 0)::BIGINT FROM pushgate_migration",
                    logger: logger
                ).decode(Int64.self) {
                    current = Int(version)
                }
                if current > PostgresSchema.latestVersion {
                    throw StoreError.backend(
                        "the database schema is at version \(current), newer than this pushgate knows (\(PostgresSchema.latestVersion)): upgrade pushgate"
                    )
                }
                for migration in PostgresSchema.migrations where migration.version > current {
                    for statement in migration.statements {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                    try await connection.query(
                        "INSERT INTO pushgate_migration (version, name) VALUES (\(migration.version), \(migration.name))",
                        logger: logger
                    )
                    logger.info(
                        "applied schema migration",
                        metadata: [
                            "store.schema": "\(schema)", "store.migration": "\(migration.version)",
                            "store.migration_name": "\(migration.name)",
                        ]
                    )
                }
                try await connection.query("COMMIT", logger: logger)
                if current == PostgresSchema.latestVersion {
                    logger.debug(
                        "schema up to date",
                        metadata: ["store.schema": "\(schema)", "store.migration": "\(current)"]
                    )
                }
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }

    /// The first key of pushgate's advisory locks ("pgat"), so that they cannot collide with an
    /// application's own single-key locks.
    static let migrationLockNamespace: Int32 = 0x7067_6174

    // MARK: Wake-ups

    private func listenForWork() async {
        var delay = Duration.milliseconds(100)
        let channel = configuration.notificationChannel
        while !Task.isCancelled {
            do {
                try await lease { connection in
                    try await connection.listen(on: channel) { notifications in
                        self.workAvailable()  // whatever was announced while nobody listened
                        for try await _ in notifications { self.workAvailable() }
                    }
                }
                delay = .milliseconds(100)
            } catch {
                if Task.isCancelled { return }
                logger.warning(
                    "work listener lost its connection; reconnecting",
                    metadata: ["store.error": "\(Self.storeError(error).message)", "store.retry_in": "\(delay)"]
                )
            }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(5))
        }
    }

    private func workAvailable() {
        for handler in wakeHandlers.withLock({ $0 }) { handler() }
    }

    /// Queues a `NOTIFY` for this schema's listeners, sent when the transaction commits.
    func notifyWork(on connection: PostgresConnection) async throws {
        try await connection.run("SELECT pg_notify(\(configuration.notificationChannel), '')", logger: logger)
    }

    // MARK: Transactions

    /// Runs `body` in one transaction (READ COMMITTED unless `isolation` says otherwise), committing
    /// when it returns. A deadlock or serialization failure reruns it (up to 5 times); other errors
    /// roll back and surface as ``StoreError`` (store errors thrown by `body` unchanged).
    func transaction<T: Sendable>(
        isolation: String? = nil,
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await ready()
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await lease { connection in
                    try await connection.run(
                        isolation.map { PostgresQuery(unsafeSQL: "BEGIN ISOLATION LEVEL \($0)") } ?? "BEGIN",
                        logger: logger
                    )
                    do {
                        let value = try await body(connection)
                        try await connection.run("COMMIT", logger: logger)
                        return value
                    } catch {
                        _ = try? await connection.run("ROLLBACK", logger: logger)
                        throw error
                    }
                }
            } catch let error as PSQLError where attempt < 5 && Self.isTransient(error) {
                if Self.sqlState(error) == "40P01" { deadlocks.add(1, ordering: .relaxed) }
                logger.debug(
                    "transaction conflict; running it again",
                    metadata: ["store.sqlstate": "\(Self.sqlState(error) ?? "")"]
                )
                try await Task.sleep(for: .milliseconds(Int64.random(in: 1...(5 * Int64(attempt)))))
                continue
            } catch let error as StoreError {
                throw error
            } catch {
                throw Self.storeError(error)
            }
        }
    }

    /// Runs `body` outside an explicit transaction (one statement, or reads that need no snapshot).
    func read<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await ready()
        do {
            return try await lease { connection in try await body(connection) }
        } catch let error as StoreError {
            throw error
        } catch {
            throw Self.storeError(error)
        }
    }

    /// Runs `body` with a connection of the pool, its socket kept alive (``ConnectionKeepalive``) and each
    /// of its queries bounded by ``Configuration/queryTimeout`` (``QueryDeadline``).
    private func lease<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        let settings = QueryDeadline.Settings(
            timeout: configuration.queryTimeout,
            observer: configuration.statementObserver
        )
        return try await QueryDeadline.$settings.withValue(settings) {
            try await client.withConnection { connection in
                await keepalive.configure(connection, logger: logger)
                return try await body(connection)
            }
        }
    }

    // MARK: Errors

    static func sqlState(_ error: PSQLError) -> String? { error.serverInfo?[.sqlState] }

    /// 40001 serialization failure, 40P01 deadlock.
    static func isTransient(_ error: PSQLError) -> Bool {
        let state = sqlState(error)
        return state == "40001" || state == "40P01"
    }

    /// A safe message: the server's message and SQL state, or the client's error code (PSQLError's own
    /// description hides everything, on purpose, and query binds may hold tokens).
    static func storeError(_ error: any Error) -> StoreError {
        if let error = error as? StoreError { return error }
        if let error = error as? PSQLError {
            if let info = error.serverInfo {
                return StoreError.backend(
                    "PostgreSQL error \(info[.sqlState] ?? "?"): \(info[.message] ?? "no message")"
                )
            }
            return StoreError.backend("PostgreSQL client error: \(error.code)")
        }
        return StoreError.backend("PostgreSQL: \(error)")
    }
}

extension PostgresConnection {
    /// Every row of `query`, decoded.
    func all<each Column: PostgresDecodable & Sendable>(
        _ query: PostgresQuery,
        as types: (repeat each Column).Type,
        logger: Logger
    ) async throws -> [(repeat each Column)] {
        try await collect(query, logger: logger).rows.map { try $0.decode(types) }
    }

    /// The first row of `query`, decoded (nil if none).
    func first<each Column: PostgresDecodable & Sendable>(
        _ query: PostgresQuery,
        as types: (repeat each Column).Type,
        logger: Logger
    ) async throws -> (repeat each Column)? {
        try await collect(query, logger: logger).rows.first.map { try $0.decode(types) }
    }

    /// Runs a statement whose rows (if any) do not matter.
    func run(_ query: PostgresQuery, logger: Logger) async throws {
        _ = try await collect(query, logger: logger)
    }
}
