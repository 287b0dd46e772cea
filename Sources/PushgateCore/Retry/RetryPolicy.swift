public import Foundation

/// Decides whether a notification that failed to reach a device is sent again, and when.
///
/// - **rejected** answers are permanent: never retried.
/// - **retryable** answers (429, 5xx, a refused stream, a lost connection) are retried with
///   exponential back-off and full jitter until the notification's deadline.
/// - **connection-fatal** outcomes (expired provider token, GOAWAY, a failed connect) were the
///   connection's fault, not the notification's: retried on the same budget.
///
/// The deadline comes from the notification's expiration, and every window runs from the moment
/// pushgate accepted the notification, not from its first attempt: what a notification says is
/// about when the backend sent it, so a notification that waited behind a long broadcast is no
/// fresher for having waited. Under a backlog longer than a window, a failed attempt is therefore
/// final at once and reported as `expired`.
/// - `.at(t)`: until `t` (APNs stores it until then too), but never longer than
///   ``maximumLifetime`` after acceptance;
/// - `.immediately` (`0`: APNs tries once and does not store it): at most
///   ``immediateMaximumAttempts`` attempts within ``immediateWindow`` of acceptance;
/// - `.storagePolicy` (header omitted): as if it expired ``storagePolicyLifetime`` after
///   acceptance.
///
/// A retry is never scheduled past the deadline: the last delay is shortened to end at it.
/// Pure: the time and the random source are arguments.
public struct RetryPolicy: Hashable, Sendable {
    public enum Decision: Hashable, Sendable {
        /// Send again after this delay.
        case retry(after: Duration)
        /// Stop; record the outcome as final.
        case giveUp(GiveUpReason)
    }

    public enum GiveUpReason: String, Hashable, Sendable, CustomStringConvertible {
        /// APNs accepted it: there is nothing to retry.
        case accepted
        /// APNs rejected it permanently.
        case rejected
        /// The deadline passed.
        case expired
        /// An `apns-expiration: 0` notification used its attempts.
        case attemptsExhausted = "attempts_exhausted"

        public var description: String { rawValue }
    }

    /// The delays between attempts. By default 1 s doubling up to 5 minutes.
    public var backoff: Backoff
    /// How many attempts in all a notification with expiration `0` gets (at least 1). Default 3.
    public var immediateMaximumAttempts: Int
    /// How long after its acceptance a notification with expiration `0` may still be retried.
    /// Default 60 seconds.
    public var immediateWindow: Duration
    /// How long a notification without an expiration (APNs' storage policy) is retried. Default 1 hour.
    public var storagePolicyLifetime: Duration
    /// The longest any notification is retried, whatever its expiration says. Default 30 days, the
    /// longest APNs stores a notification.
    public var maximumLifetime: Duration

    public init(
        backoff: Backoff = Backoff(base: .seconds(1), multiplier: 2, cap: .seconds(300)),
        immediateMaximumAttempts: Int = 3,
        immediateWindow: Duration = .seconds(60),
        storagePolicyLifetime: Duration = .seconds(3600),
        maximumLifetime: Duration = .seconds(30 * 24 * 3600)
    ) {
        self.backoff = backoff
        self.immediateMaximumAttempts = max(immediateMaximumAttempts, 1)
        self.immediateWindow = immediateWindow
        self.storagePolicyLifetime = storagePolicyLifetime
        self.maximumLifetime = maximumLifetime
    }

    /// What to do after attempt number `attempt` (1 for the first send) ended with `outcome`.
    ///
    /// - Parameters:
    ///   - acceptedAt: when pushgate accepted the notification (its request's `createdAt`); the
    ///     windows of `.immediately` and `.storagePolicy` run from it.
    ///   - now: the current wall-clock time.
    public func decide(
        after outcome: OutcomeClass,
        attempt: Int,
        expiration: Expiration,
        acceptedAt: Date,
        now: Date,
        using generator: inout some RandomNumberGenerator
    ) -> Decision {
        switch outcome {
        case .accepted: return .giveUp(.accepted)
        case .rejected: return .giveUp(.rejected)
        case .retryable, .connectionFatal: break
        }
        if case .immediately = expiration, attempt >= immediateMaximumAttempts {
            return .giveUp(.attemptsExhausted)
        }
        let deadline = self.deadline(for: expiration, acceptedAt: acceptedAt)
        let remaining = deadline.timeIntervalSince(now)
        guard remaining > 0 else { return .giveUp(.expired) }
        let delay = backoff.delay(forAttempt: attempt, using: &generator)
        return .retry(after: min(delay, .seconds(remaining)))
    }

    /// The moment after which a notification is no longer retried.
    public func deadline(for expiration: Expiration, acceptedAt: Date) -> Date {
        let longest = acceptedAt.addingTimeInterval(maximumLifetime.seconds)
        switch expiration {
        case .immediately:
            return min(acceptedAt.addingTimeInterval(immediateWindow.seconds), longest)
        case .storagePolicy:
            return min(acceptedAt.addingTimeInterval(storagePolicyLifetime.seconds), longest)
        case .at(let epochSeconds):
            return min(Date(timeIntervalSince1970: TimeInterval(epochSeconds)), longest)
        }
    }
}
