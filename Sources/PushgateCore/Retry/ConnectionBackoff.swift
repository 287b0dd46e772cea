/// The delays between attempts to (re)connect: exponential back-off with full jitter, reset by a
/// successful connection. Pure: the owner sleeps on its own clock.
///
/// ```swift
/// var backoff = ConnectionBackoff()
/// // connect failed:
/// let delay = backoff.connectFailed(using: &generator)   // sleep `delay`, then try again
/// // connected:
/// backoff.connected()
/// ```
public struct ConnectionBackoff: Hashable, Sendable {
    public let backoff: Backoff
    /// Failed attempts since the last successful connection.
    public private(set) var consecutiveFailures = 0

    /// 100 ms base, doubling, 30 s cap by default.
    public init(backoff: Backoff = .reconnect) {
        self.backoff = backoff
    }

    /// An attempt to connect failed; returns how long to wait before the next one.
    public mutating func connectFailed(using generator: inout some RandomNumberGenerator) -> Duration {
        // Saturate: past ~60 failures the ceiling is the cap anyway.
        if consecutiveFailures < 1_000 { consecutiveFailures += 1 }
        return backoff.delay(forAttempt: consecutiveFailures, using: &generator)
    }

    /// A connection was established: the next failure starts from the base again.
    public mutating func connected() {
        consecutiveFailures = 0
    }
}
