import Logging
import NIOCore
import PostgresNIO
import PushgateCore

/// How long one store query may wait for PostgreSQL (``PostgresStore/Configuration/queryTimeout``), for
/// the queries of the current task: ``PostgresStore`` sets it around every transaction and read, so that
/// the helpers (`all`, `first`, `run`) need no extra argument. nil: no deadline.
enum QueryDeadline {
    /// The deadline, and ``PostgresStore/Configuration/statementObserver``: one task-local value (a
    /// second one, nested, crashed a release build in `swift_task_localValuePush`).
    struct Settings: Sendable {
        var timeout: Duration?
        var observer: (@Sendable (String) -> Void)?
    }

    @TaskLocal static var settings = Settings()
}

extension PostgresConnection {
    /// Runs `query` and collects its rows; fails at once, instead of waiting forever, when the connection
    /// is already closed, and closes the connection when the query outlives ``QueryDeadline/Settings/timeout``.
    ///
    /// postgres-nio (as pinned) writes a query into its channel without a write promise. Once the server
    /// has closed a connection (a restart, `pg_terminate_backend`) and NIO has torn down the channel's
    /// pipeline, a query written to it is dropped and its promise never completed: the caller waits
    /// forever and keeps its pool lease (docs/reliability.md, "PostgreSQL faults"). Here the check and the
    /// write run together on the connection's event loop: while the channel is active its handler is in
    /// the pipeline and fails the query if the connection closes later; once it is inactive, nothing is
    /// sent and the call fails.
    ///
    /// A server that stops answering without closing (a network that drops packets, a stopped host) would
    /// leave the query waiting until TCP gives up, which may be never for a silent peer. At the deadline
    /// the connection is closed: its handler fails the query, the caller gets a ``StoreError`` (transient:
    /// the dispatcher's back-off retries), the transaction's `ROLLBACK` fails at once on the closed
    /// connection, and the pool replaces it.
    func collect(_ query: PostgresQuery, logger: Logger) async throws -> PostgresQueryResult {
        let settings = QueryDeadline.settings
        settings.observer?(query.sql)
        let timeout = settings.timeout
        return try await eventLoop.flatSubmit { () -> EventLoopFuture<PostgresQueryResult> in
            guard !self.isClosed else {
                return self.eventLoop.makeFailedFuture(
                    StoreError.backend("the connection to PostgreSQL is closed")
                )
            }
            let result = self.query(query, logger: logger)
            guard let timeout else { return result }
            let expiry = DeadlineExpiry()
            let timer = self.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
                expiry.expired = true
                logger.warning(
                    "PostgreSQL did not answer a query in time; closing its connection",
                    metadata: ["store.query_timeout": "\(timeout)", "store.connection": "\(self.id)"]
                )
                let _: EventLoopFuture<Void> = self.close()
            }
            return result.always { _ in timer.cancel() }.flatMapErrorThrowing { error in
                guard expiry.expired else { throw error }
                throw StoreError.backend(
                    "PostgreSQL did not answer within \(timeout) (query_timeout); the connection was closed"
                )
            }
        }.get()
    }
}

/// Whether a query's deadline passed; read and written on the connection's event loop only.
private final class DeadlineExpiry: @unchecked Sendable {
    var expired = false
}
