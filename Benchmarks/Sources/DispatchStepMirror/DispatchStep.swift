public import Foundation
public import PushgateCore

/// The dispatcher's per-device decision, reachable from the benchmarks.
///
/// `OutcomeDisposition` is internal to `PushgateDispatch`, and the root package exports no
/// `PushgateDispatch` product. `OutcomeDisposition.swift` in this folder is a symbolic link to the
/// root's file, compiled here unchanged, so the benchmark measures the same code the dispatcher runs.
public struct DispatchStep: Sendable {
    /// The decision, opaque to callers: only kept alive so the work that built it is not optimised away.
    public struct Disposition {
        let value: OutcomeDisposition
        /// Whether it was a retry (a cheap way for a benchmark to consume the value).
        public var isRetry: Bool {
            if case .retry = value { return true }
            return false
        }
    }

    public static func decide(
        _ outcome: APNsOutcome, token: DeviceToken, attempt: Int, request: NotificationRequest, policy: RetryPolicy,
        now: Date, using generator: inout some RandomNumberGenerator
    ) -> Disposition {
        Disposition(
            value: OutcomeDisposition.decide(
                outcome, token: token, attempt: attempt, request: request, policy: policy, now: now, using: &generator))
    }
}
