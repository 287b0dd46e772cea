/// Where an ingress (UDP, HTTP) hands an accepted notification request: it is stored durably before
/// `submit` returns, and the dispatcher is woken to send it.
public protocol NotificationIntake: Sendable {
    /// Stores the request (one transaction) and schedules its delivery. Throws `StoreError` for an
    /// unknown group, a request with no target, or a storage failure: nothing is stored then.
    func submit(_ request: NotificationRequest) async throws -> EnqueueResult
}
