import Logging
import NIOCore
import PostgresNIO
import PushgateCore

extension PostgresConnection {
    /// Runs `query` and collects its rows; fails at once, instead of waiting forever, when the connection
    /// is already closed.
    ///
    /// postgres-nio (as pinned) writes a query into its channel without a write promise. Once the server
    /// has closed a connection (a restart, `pg_terminate_backend`) and NIO has torn down the channel's
    /// pipeline, a query written to it is dropped and its promise never completed: the caller waits
    /// forever and keeps its pool lease (docs/reliability.md, "PostgreSQL faults"). Here the check and the
    /// write run together on the connection's event loop: while the channel is active its handler is in
    /// the pipeline and fails the query if the connection closes later; once it is inactive, nothing is
    /// sent and the call fails.
    func collect(_ query: PostgresQuery, logger: Logger) async throws -> PostgresQueryResult {
        try await eventLoop.flatSubmit { () -> EventLoopFuture<PostgresQueryResult> in
            guard !self.isClosed else {
                return self.eventLoop.makeFailedFuture(
                    StoreError.backend("the connection to PostgreSQL is closed")
                )
            }
            return self.query(query, logger: logger)
        }.get()
    }
}
