/// Whether a failed store call may succeed if made again. Pure.
///
/// A broken rule (``StoreError/Code/unknownGroup``, ``StoreError/Code/noTargets``,
/// ``StoreError/Code/duplicateRequestID``, ``StoreError/Code/invalidArgument``) fails the same way every
/// time: the request is refused. Anything else (``StoreError/Code/backend``, a code added later, an error
/// that is not a `StoreError` such as a lost connection) may pass once the backend recovers.
public enum StoreFailureKind: Hashable, Sendable {
    /// The same call fails again: do not retry.
    case permanent
    /// The backend failed: retry with back-off.
    case transient

    public init(classifying error: any Error) {
        guard let storeError = error as? StoreError else {
            self = .transient
            return
        }
        switch storeError.code {
        case .unknownGroup, .noTargets, .duplicateRequestID, .invalidArgument: self = .permanent
        default: self = .transient
        }
    }
}
