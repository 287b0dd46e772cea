public import NIOCore

/// A token bucket of `rate` requests per second, holding at most one second's worth; the C pushd's `-r`.
/// Pure: the caller passes `now`, and schedules its own wake-up after `waitForNext`.
public struct RateLimiter: Sendable {
    public let rate: Int
    private var tokens: Double = 0
    private var refilledAt: NIODeadline?

    public init(rate: Int) {
        precondition(rate >= 1)
        self.rate = rate
    }

    /// Requests that may start now. The first call allows one (a new connection starts slowly).
    public mutating func allowance(now: NIODeadline) -> Int {
        let capacity = Double(rate)
        if let refilledAt {
            tokens = min(capacity, tokens + Double((now - refilledAt).nanoseconds) / 1e9 * capacity)
        } else {
            tokens = 1
        }
        refilledAt = now
        return Int(tokens.rounded(.down))
    }

    /// `count` requests started.
    public mutating func spend(_ count: Int) {
        tokens -= Double(count)
    }

    /// How long until the next request is allowed, as of the last `allowance(now:)`.
    public var waitForNext: TimeAmount {
        guard tokens < 1 else { return .zero }
        return .nanoseconds(Int64((1 - tokens) / Double(rate) * 1e9) + 1)
    }
}
