import Synchronization

/// Thrown by ``withDeadline(_:_:)`` when the work did not finish in time.
package struct DeadlineExceeded: Error, CustomStringConvertible {
    package var timeout: Duration
    package var description: String { "no answer within \(timeout)" }
}

/// `body`'s result, or ``DeadlineExceeded`` once `timeout` has passed, without waiting for `body` any
/// longer: `body` runs in a task of its own, which is cancelled then and may go on until it notices
/// (work that cannot be cancelled, such as a query to a server that went silent, ends at its own
/// deadline). For answers that must come quickly, such as a readiness probe.
package func withDeadline<T: Sendable>(
    _ timeout: Duration,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let race = DeadlineRace<T>()
    return try await withCheckedThrowingContinuation { continuation in
        race.continuation.withLock { $0 = continuation }
        let work = Task {
            let result: Result<T, any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            race.timer.withLock { $0?.cancel() }
            race.continuation.withLock { $0.take() }?.resume(with: result)
        }
        let timer = Task {
            guard (try? await Task.sleep(for: timeout)) != nil,
                let continuation = race.continuation.withLock({ $0.take() })
            else { return }
            work.cancel()
            continuation.resume(throwing: DeadlineExceeded(timeout: timeout))
        }
        race.timer.withLock { $0 = timer }
    }
}

/// The continuation that the first of the work and the timer resumes, and the timer to cancel.
private final class DeadlineRace<T: Sendable>: Sendable {
    let continuation = Mutex<CheckedContinuation<T, any Error>?>(nil)
    let timer = Mutex<Task<Void, Never>?>(nil)
}
