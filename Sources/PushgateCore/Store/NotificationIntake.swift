/// Where an ingress (UDP, HTTP) hands an accepted notification request: it is stored durably before
/// `submit` returns, and the dispatcher is woken to send it.
public protocol NotificationIntake: Sendable {
    /// Stores the request (one transaction) and schedules its delivery. Throws `StoreError` for an
    /// unknown group, a request with no target, or a storage failure: nothing is stored then.
    func submit(_ request: NotificationRequest) async throws -> EnqueueResult

    /// ``submit(_:)`` for requests that arrived together (the UDP ingress's batch), in their order, with
    /// one answer each: what ``submit(_:)`` would have answered or thrown. An intake may store them in
    /// one transaction (group commit); each answer still comes only after the commit that holds it.
    func submit(batch requests: [NotificationRequest]) async -> [Result<EnqueueResult, any Error>]
}

extension NotificationIntake {
    /// One ``submit(_:)`` after the other. After a failure that may pass when tried again
    /// (``StoreFailureKind/transient``) the rest are not tried and answer that failure, as in one failed
    /// transaction: a caller that tries them again in order keeps their order.
    public func submit(batch requests: [NotificationRequest]) async -> [Result<EnqueueResult, any Error>] {
        var answers: [Result<EnqueueResult, any Error>] = []
        answers.reserveCapacity(requests.count)
        for request in requests {
            do {
                answers.append(.success(try await submit(request)))
            } catch {
                answers.append(.failure(error))
                if StoreFailureKind(classifying: error) == .transient {
                    answers += Array(repeating: .failure(error), count: requests.count - answers.count)
                    break
                }
            }
        }
        return answers
    }
}
