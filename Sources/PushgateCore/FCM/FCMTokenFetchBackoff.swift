public import Foundation

/// When an access token may be fetched again after a fetch failed, and whether the failure is an alarm.
///
/// An outage of the token endpoint (5xx, 429, a timeout, a dropped connection: anything but a definitive
/// refusal, ``FCMCredentialError/isDefinitive``) only delays: the next fetch waits an exponential back-off
/// with jitter (by default 0.5 s doubling to 30 s), and the sends that need a token wait for it. A
/// definitive refusal (`invalid_grant`, `invalid_client`: a revoked or unknown key) is a configuration
/// alarm: the next fetch waits longer (by default 30 s doubling to 10 minutes), and the sends that need a
/// token are held until then rather than failed. A success ends either.
///
/// The delay is "equal jitter": half the ceiling of the attempt, plus a random share of the other half.
/// Half keeps a floor under the spacing (a fetch per batch would hammer an endpoint that is already down);
/// the random half keeps several gateways using one service account from retrying in step.
///
/// Pure: the time and the random source are arguments; it fetches, sleeps and logs nothing.
public struct FCMTokenFetchBackoff: Sendable {
    public struct Configuration: Hashable, Sendable {
        /// After an outage.
        public var outage: Backoff
        /// After a definitive refusal.
        public var refusal: Backoff

        public init(
            outage: Backoff = Backoff(base: .milliseconds(500), multiplier: 2, cap: .seconds(30)),
            refusal: Backoff = Backoff(base: .seconds(30), multiplier: 2, cap: .seconds(600))
        ) {
            self.outage = outage
            self.refusal = refusal
        }
    }

    /// Fetching is paused after a failure.
    public struct Pause: Hashable, Sendable {
        /// The last failure.
        public var error: FCMCredentialError
        /// The next fetch, no earlier.
        public var retryAt: Date
        /// Failed fetches in a row.
        public var failures: Int
        /// The first failure in a row.
        public var since: Date

        /// The token endpoint refused the credentials for good: a configuration alarm.
        public var isRefusal: Bool { error.isDefinitive }
    }

    /// What a send that needs a token (and has none valid) is to do now.
    public enum Decision: Hashable, Sendable {
        /// Fetch (or wait for the fetch under way).
        case fetch
        /// An outage: wait, and fetch again at this time.
        case wait(until: Date)
        /// The credentials were refused: do not wait here; the next fetch is at `pause.retryAt`.
        case refused(Pause)
    }

    /// What a failed fetch changed.
    public enum FailureTransition: Hashable, Sendable {
        /// The first outage in a row.
        case outageBegan(Pause)
        /// The endpoint refused the credentials, and did not the time before: raise the alarm.
        case alarmRaised(Pause)
        /// Another failure of the same kind as the last one.
        case persists(Pause)
    }

    /// What a successful fetch changed.
    public enum SuccessTransition: Hashable, Sendable {
        /// Nothing had failed.
        case none
        /// It ends a run of failures; `wasRefusal`: the last of them was a refusal (the alarm clears).
        case recovered(failures: Int, since: Date, wasRefusal: Bool)
    }

    public let configuration: Configuration
    /// Set from a failure until the next success.
    public private(set) var pause: Pause?

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// The refusal in force, if the last fetch was refused: the configuration alarm.
    public var alarm: Pause? { pause.flatMap { $0.isRefusal ? $0 : nil } }

    /// Whether a send with no valid token may fetch one at `now`.
    public func decide(now: Date) -> Decision {
        guard let pause, now < pause.retryAt else { return .fetch }
        return pause.isRefusal ? .refused(pause) : .wait(until: pause.retryAt)
    }

    /// Whether a token that is due for refresh (but still valid) may be refreshed at `now`: not before the
    /// back-off of a failed refresh ends, so a failing endpoint is not asked once per batch.
    public func mayRefresh(now: Date) -> Bool {
        guard let pause else { return true }
        return now >= pause.retryAt
    }

    /// A fetch failed at `now` with `error`.
    public mutating func fetchFailed(
        _ error: FCMCredentialError,
        now: Date,
        using generator: inout some RandomNumberGenerator
    ) -> FailureTransition {
        let previous = pause
        let failures = min((previous?.failures ?? 0) + 1, 1_000)
        let backoff = error.isDefinitive ? configuration.refusal : configuration.outage
        let ceiling = backoff.ceiling(forAttempt: failures)
        let fraction = Double(generator.next() >> 11) * 0x1p-53
        let delay = ceiling / 2 + (ceiling / 2) * fraction
        let next = Pause(
            error: error,
            retryAt: now.addingTimeInterval(
                Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
            ),
            failures: failures,
            since: previous?.since ?? now
        )
        pause = next
        if error.isDefinitive, previous?.isRefusal != true { return .alarmRaised(next) }
        if previous == nil { return .outageBegan(next) }
        return .persists(next)
    }

    /// A fetch succeeded.
    public mutating func fetchSucceeded() -> SuccessTransition {
        guard let previous = pause else { return .none }
        pause = nil
        return .recovered(failures: previous.failures, since: previous.since, wasRefusal: previous.isRefusal)
    }
}
