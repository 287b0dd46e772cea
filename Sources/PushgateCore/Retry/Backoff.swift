/// Exponential back-off with full jitter: the delay before retry `n` is drawn uniformly from
/// `[0, min(cap, base × multiplier^(n-1)))`.
///
/// Full jitter spreads the retries of many requests that failed together (a GOAWAY, a 503 burst)
/// instead of sending them back in lock-step. The random source is injected, so tests are
/// deterministic.
public struct Backoff: Hashable, Sendable {
    /// The ceiling of the first delay.
    public var base: Duration
    /// How much the ceiling grows per attempt (at least 1).
    public var multiplier: Double
    /// The largest ceiling.
    public var cap: Duration

    /// Out-of-range values are corrected rather than trapped on, since they may come from a
    /// configuration file: a negative base counts as zero, a cap below the base as the base, and a
    /// multiplier below 1 (or not finite) as 1.
    public init(base: Duration, multiplier: Double = 2, cap: Duration) {
        self.base = max(base, .zero)
        self.multiplier = multiplier.isFinite ? max(multiplier, 1) : 1
        self.cap = max(cap, self.base)
    }

    /// For reconnecting: 100 ms doubling up to 30 s.
    public static let reconnect = Backoff(base: .milliseconds(100), multiplier: 2, cap: .seconds(30))

    /// The upper bound of the delay before retry `attempt` (1 for the first retry):
    /// `min(cap, base × multiplier^(attempt-1))`.
    public func ceiling(forAttempt attempt: Int) -> Duration {
        // In whole nanoseconds, so that 100 ms × 2⁸ is exactly 25.6 s.
        let grown = (base.seconds * 1e9 * power(multiplier, max(attempt, 1) - 1)).rounded()
        guard grown.isFinite, grown < cap.seconds * 1e9 else { return cap }
        return .nanoseconds(Int64(grown))
    }

    /// A delay in `[0, ceiling(forAttempt: attempt))`, drawn from `generator`.
    public func delay(forAttempt attempt: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        let ceilingNanoseconds = ceiling(forAttempt: attempt).seconds * 1e9
        // 53 random bits give a fraction in [0, 1) without the rejection loop of `random(in:)`, so
        // any generator (even a constant one in tests) yields a delay at once.
        let fraction = Double(generator.next() >> 11) * 0x1p-53
        return .nanoseconds(Int64((ceilingNanoseconds * fraction).rounded(.down)))
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) * 1e-18
    }
}

/// `base^exponent` for whole exponents, without importing Foundation for one function.
private func power(_ base: Double, _ exponent: Int) -> Double {
    // By squaring: at most 63 rounds, even for `Int.max`.
    var result = 1.0
    var factor = base
    var remaining = exponent
    while remaining > 0 {
        if remaining & 1 == 1 { result *= factor }
        factor *= factor
        remaining >>= 1
        if !result.isFinite { return .infinity }
    }
    return result
}
