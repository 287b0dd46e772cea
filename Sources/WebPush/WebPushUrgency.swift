public import PushgateCore

/// `Urgency` (RFC 8030 §5.3): how eagerly the browser's device should be woken.
public enum WebPushUrgency: String, CaseIterable, Hashable, Sendable {
    case veryLow = "very-low"
    case low
    case normal
    case high

    /// From the request's type and priority, as APNs would treat them:
    /// priority 10 → `high`; priority 5 → `normal`, or `low` for background (silent) notifications;
    /// priority 1 → `very-low`. So pushd's `urgent` is `high`, `normal` is `normal`, `background` is `low`.
    public init(pushType: PushType, priority: Priority) {
        switch priority {
        case .immediate: self = .high
        case .conservePower: self = pushType == .background ? .low : .normal
        case .powerSaving: self = .veryLow
        }
    }
}
