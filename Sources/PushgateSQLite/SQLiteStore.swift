import Foundation
import GRDB
public import Logging
public import PushgateCore
import Synchronization

/// The default store: one SQLite file in WAL mode, through GRDB's `DatabasePool` (one writer, several
/// concurrent readers, so fan-out reads do not wait for registrations and outcomes being written).
///
/// Every operation is one transaction. Writes are batched by the callers (a registration burst, a page of
/// outcomes), and each batch reuses cached prepared statements. See ``PushStore`` for the contract and
/// `SQLiteSchema` for the tables.
///
/// All database work runs in nonisolated `async` methods, so GRDB's async overloads are chosen and no
/// caller's actor is blocked while SQLite works.
public final class SQLiteStore: PushStore {
    public struct Configuration: Sendable {
        /// How long a writer waits for a lock held by another connection before failing.
        public var busyTimeout: Duration = .seconds(5)
        /// `PRAGMA synchronous`: see ``Synchronous``. Default `.full`.
        public var synchronous: Synchronous = .full
        /// Concurrent read connections (fan-out pages, lookups, reports).
        public var maximumReaderCount: Int = 4
        /// Open all of them at the start (``openEveryReader(of:count:)``), as the gateway does, instead of as
        /// reads first need them. Off by default: a test process holds many small stores at once, and
        /// Foundation's `Process.run` (6.3.1) over-reads its `/proc/self/fd` listing once a process has
        /// about a thousand descriptors (docs/reliability.md, sanitizer exception 2).
        public var opensEveryReaderAtStart = false
        /// The statement that puts `synchronous` back to FULL after a claim written without fsync. Tests
        /// replace it to show that a failure there stops the store.
        package var restoreFullSynchronousSQL = "PRAGMA synchronous = FULL"
        /// The write-ahead log's bound in bytes, for a database up to twice this size (a larger one may
        /// keep a WAL of half its size); lower on a volume with little room (``WALBound``). Past it, the
        /// commit that reached it is followed by a checkpoint that copies the WAL into the database and
        /// starts it over.
        public var walLimitBytes: Int64 = 64 << 20
        /// Below this much free space on the database's volume, ``DiskUse/isLow`` holds: the gateway warns
        /// and `/readyz` answers 503 `disk_low`, before writes start failing. Default 32 MiB.
        public var minimumFreeBytes: Int64 = 32 << 20
        /// The function that makes `device.token_key`. Tests narrow it to force collisions; a file must
        /// always be opened with the function that wrote it.
        package var tokenKey: TokenKey = .standard
        /// Called with the SQL of every statement any connection runs (statements of triggers included).
        /// Tests count statements per operation with it; nil (the default) installs no trace at all.
        package var statementObserver: (@Sendable (String) -> Void)?

        public init() {}
    }

    /// How hard SQLite pushes each commit to disk.
    ///
    /// The ledger acknowledges a notification request (HTTP 202) only after its transaction commits, and
    /// promises that nothing acknowledged is lost. In WAL mode:
    /// - `.normal` writes each commit to the WAL file without `fsync`; the WAL is synced at checkpoints.
    ///   A *process* crash (SIGKILL, abort) loses nothing, because the committed pages are in the OS page
    ///   cache. A *power loss or kernel crash* can roll back the last commits (the database stays
    ///   consistent, but acknowledged requests and recorded outcomes may vanish).
    /// - `.full` also `fsync`s the WAL on every commit: a commit survives power loss too.
    ///
    /// We pick `.full`: "durably stored before it is acknowledged" must hold on a machine that loses
    /// power, and because every write path is batched (a registration burst, a page of outcomes, one
    /// request), the price is one `fsync` per batch, not per device. `.normal` is available for
    /// deployments (and benchmarks) that accept losing the last moments before a power cut.
    public enum Synchronous: String, Sendable {
        case normal = "NORMAL"
        case full = "FULL"
    }

    let pool: DatabasePool
    let logger: Logger
    public let path: String
    let synchronous: Synchronous
    let restoreFullSynchronousSQL: String
    let tokenKey: TokenKey
    /// Set once durability could not be restored: from then on every call fails with it.
    private let stopped = Mutex<StoreError?>(nil)
    let walBound: WALBound
    let minimumFreeBytes: Int64
    let busyTimeoutMilliseconds: Int
    /// The WAL's size at the last ``maintain()`` round (unchanged since: the writer was idle).
    let walBytesAtLastRound = Mutex<Int64>(0)
    /// True while a checkpoint is queued or running: commits past the bound do not queue another.
    let checkpointing = Atomic<Bool>(false)

    /// Opens (creating if needed) the database at `path` and applies pending migrations.
    public init(
        path: String,
        configuration: Configuration = .init(),
        logger: Logger = Logger(label: "pushgate.store")
    )
        throws
    {
        var config = GRDB.Configuration()
        config.label = "pushgate.sqlite"
        config.foreignKeysEnabled = true  // PRAGMA foreign_keys = ON on every connection
        config.busyMode = .timeout(configuration.busyTimeout.seconds)
        config.maximumReaderCount = max(1, configuration.maximumReaderCount)
        let tokenKey = configuration.tokenKey
        let observer = configuration.statementObserver
        config.prepareDatabase { db in  // every connection
            db.add(function: tokenKey.sqlFunction)
            if let observer { db.trace(options: .statement) { observer($0.description) } }
        }
        let synchronous = configuration.synchronous.rawValue
        do {
            self.pool = try DatabasePool(path: path, configuration: config)  // journal_mode = WAL
            // Set on the pool's single writer connection, which lives as long as the pool. Not in
            // `prepareDatabase`: GRDB switches the writer to WAL after that hook and sets NORMAL then.
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
                // The store checkpoints the WAL itself (``WALBound``, after commits and when the writer is
                // idle) instead of SQLite's fixed count of pages; a WAL file left larger than the limit (a
                // restart after a large transaction) is cut back to it whenever the WAL starts over.
                try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
                try db.execute(sql: "PRAGMA journal_size_limit = \(configuration.walLimitBytes)")
            }
            try SQLiteSchema.migrator(tokenKey: tokenKey).migrate(pool)
            if configuration.opensEveryReaderAtStart {
                try Self.openEveryReader(of: pool, count: config.maximumReaderCount)
            }
        } catch let error as DatabaseError {
            throw StoreError.backend(
                "cannot open SQLite database at \(path): \(error.message ?? "\(error.resultCode)")"
            )
        }
        self.path = path
        self.logger = logger
        self.synchronous = configuration.synchronous
        self.restoreFullSynchronousSQL = configuration.restoreFullSynchronousSQL
        self.tokenKey = tokenKey
        self.walBound = WALBound(limitBytes: configuration.walLimitBytes)
        self.minimumFreeBytes = configuration.minimumFreeBytes
        self.busyTimeoutMilliseconds = Int(configuration.busyTimeout.seconds * 1000)
        logger.debug("store opened", metadata: ["store.path": "\(path)", "store.synchronous": "\(synchronous)"])
    }

    /// Opens all `count` reader connections of the pool now, at the start.
    ///
    /// GRDB opens a reader only when every open one is busy, and never closes one (it would only on a
    /// memory warning, which Linux does not send). So the gateway's descriptors (a database file and its WAL
    /// per connection) stepped up whenever a busier moment first needed one more reader, long after the
    /// start: in the one-hour soak of 2026-11-27 the fourth reader opened after 20 minutes. Opened here, they
    /// are a fixed cost of the start, the store's descriptors do not grow afterwards, and a reader that cannot
    /// open (file limit, permissions) fails the start instead of a read in the middle of a broadcast.
    static func openEveryReader(of pool: DatabasePool, count: Int) throws {
        // Each read holds its connection until all `count` reads hold one, so that the pool cannot hand
        // out a reader twice: it must open `count` of them. `asyncRead` runs each on its reader's own
        // serial queue, so the reads wait for each other on separate threads, not on one.
        let holding = DispatchGroup()
        let release = DispatchSemaphore(value: 0)
        let failure = FirstError()
        for _ in 0..<count {
            holding.enter()
            pool.asyncRead { database in
                if case .failure(let error) = database {
                    failure.value.withLock { $0 = $0 ?? error }
                    holding.leave()
                    return
                }
                holding.leave()
                release.wait()
            }
        }
        holding.wait()
        for _ in 0..<count { release.signal() }
        if let error = failure.value.withLock({ $0 }) { throw error }
    }

    /// The first error of concurrent work (a class: a `Mutex` cannot be captured by an escaping closure).
    private final class FirstError: Sendable {
        let value = Mutex<(any Error)?>(nil)
    }

    /// Closes the database connections. Later calls fail. Idempotent; also done when the store is released.
    public func close() throws {
        do {
            try pool.close()
        } catch let error as DatabaseError {
            throw StoreError.backend(Self.describe(error))
        }
    }

    /// Runs `body` in one write transaction (IMMEDIATE), mapping SQLite errors to ``StoreError``.
    func write<T: Sendable>(_ body: @Sendable (Database) throws -> T) async throws -> T {
        try ensureRunning()
        let result: T
        do {
            result = try await pool.write(body)
        } catch let error as DatabaseError {
            await writeFailed(error)
            throw StoreError.backend(Self.describe(error))
        }
        await committed()
        return result
    }

    /// Like ``write(_:)``, but the commit is not pushed to disk before returning (`synchronous =
    /// NORMAL` for this one transaction). For writes whose loss in a power cut costs a resend and
    /// never a notification: a chunk's claim (a lost claim is claimed again). A process crash loses
    /// nothing either way (WAL frames are in the OS's cache), and the next durable commit carries
    /// these frames to disk with it. Saves an fsync on the path from a request to its first send.
    ///
    /// If `synchronous` cannot be put back to FULL afterwards (the statement fails, or reading it back
    /// does not say FULL), every later commit would skip its fsync without a word: the store stops
    /// instead, and this call and every later one fail with a backend error.
    func writeUnsynced<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        guard synchronous == .full else { return try await write(body) }
        try ensureRunning()
        let restore = restoreFullSynchronousSQL
        let pool = self.pool
        let outcome: (result: Result<T, any Error>, restored: Result<Void, any Error>)
        do {
            // In a task of its own: GRDB turns the caller's cancellation into a cancelled connection, whose
            // next statement throws. Landing after the commit, it would fail the restore below and stop the
            // store for good over a claim that succeeded (the dispatcher's loop is cancelled at shutdown).
            outcome = try await Task {
                try await pool.writeWithoutTransaction { db in
                    try db.execute(sql: "PRAGMA synchronous = NORMAL")
                    let result = Result<T, any Error> {
                        var value: T?
                        try db.inTransaction(.immediate) {
                            value = try body(db)
                            return .commit
                        }
                        return value!
                    }
                    let restored = Result<Void, any Error> {
                        try db.execute(sql: restore)
                        let level = try Int.fetchOne(db, sql: "PRAGMA synchronous")
                        guard level == 2 else {
                            throw StoreError.backend("PRAGMA synchronous reads \(level ?? -1), not 2 (FULL)")
                        }
                    }
                    return (result, restored)
                }
            }.value
        } catch let error as DatabaseError {
            await writeFailed(error)
            throw StoreError.backend(Self.describe(error))
        }
        if case .failure(let error) = outcome.restored {
            let reason = (error as? DatabaseError).map(Self.describe) ?? "\(error)"
            let failure = StoreError.backend(
                "SQLite store stopped: synchronous = FULL could not be restored after a write without fsync "
                    + "(\(reason)); "
                    + "later commits would not be durable. Restart the gateway"
            )
            stopped.withLock { if $0 == nil { $0 = failure } }
            logger.error("store stopped: durability could not be restored", metadata: ["store.error": "\(reason)"])
            throw failure
        }
        let result: T
        do {
            result = try outcome.result.get()
        } catch let error as DatabaseError {
            await writeFailed(error)
            throw StoreError.backend(Self.describe(error))
        }
        await committed()
        return result
    }

    /// Throws the error that stopped the store, if it was stopped.
    func ensureRunning() throws(StoreError) {
        if let failure = stopped.withLock({ $0 }) { throw failure }
    }

    /// Runs `body` in one read transaction (a WAL snapshot), mapping SQLite errors to ``StoreError``.
    func read<T: Sendable>(_ body: @Sendable (Database) throws -> T) async throws -> T {
        try ensureRunning()
        do {
            return try await pool.read(body)
        } catch let error as DatabaseError {
            throw StoreError.backend(Self.describe(error))
        }
    }

    static func describe(_ error: DatabaseError) -> String {
        let text = "SQLite error \(error.resultCode.rawValue): \(error.message ?? "no message")"
        guard error.resultCode == .SQLITE_FULL else { return text }
        return "the database's volume is full (\(text)); writes resume by themselves once it has room"
    }
}

extension Duration {
    var seconds: TimeInterval { TimeInterval(Millis.from(self)) / 1000 }
}
