import Synchronization

/// The SQL a store sent, in order, until taken: what a store's statement observer hands to the tests that
/// count statements per phase (both stores count the same way).
public final class RecordedStatements: Sendable {
    private let seen = Mutex<[String]>([])

    public init() {}

    public func record(_ sql: String) { seen.withLock { $0.append(sql) } }

    /// Everything recorded since the last take.
    public func take() -> [String] {
        seen.withLock { taken in
            defer { taken = [] }
            return taken
        }
    }
}
