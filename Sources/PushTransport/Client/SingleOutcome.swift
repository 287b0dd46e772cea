import NIOConcurrencyHelpers

/// Bridges one request's outcome to the task awaiting it (`APNsClient.send`, `FCMClient.send`):
/// the request's receiver resumes it, and cancelling the task abandons the request.
package final class SingleOutcome<Outcome: Sendable>: @unchecked Sendable {
    // @unchecked: every stored property is only accessed under `lock`.
    private let lock = NIOLock()
    private var continuation: CheckedContinuation<Outcome, Never>?
    private var id: UInt64?
    private var cancelled = false

    package init() {}

    /// The receiver's answer: resumes the awaiting task (once).
    package func resume(_ outcome: Outcome) {
        let continuation = lock.withLock { () -> CheckedContinuation<Outcome, Never>? in
            defer { self.continuation = nil }
            return self.continuation
        }
        continuation?.resume(returning: outcome)
    }

    fileprivate func install(_ continuation: CheckedContinuation<Outcome, Never>) {
        lock.withLock { self.continuation = continuation }
    }

    /// Records the pool id; returns true when the task was cancelled before it was known.
    fileprivate func submitted(id: UInt64) -> Bool {
        lock.withLock {
            self.id = id
            return cancelled
        }
    }

    /// Records the cancellation; returns the pool id if the request was already submitted.
    fileprivate func cancellationRequested() -> UInt64? {
        lock.withLock {
            cancelled = true
            return id
        }
    }
}

extension TransportFront {
    /// Submits one request whose receiver resumes `single`, and waits for its outcome. Cancelling the
    /// task abandons the request and frees its stream.
    package func submitAndWait<Outcome>(
        _ submission: Submission,
        resuming single: SingleOutcome<Outcome>
    ) async -> Outcome {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                single.install(continuation)
                let ids = submit([submission])
                // Cancelled before the id was known: abandon it now rather than at its deadline.
                if single.submitted(id: ids[0]) { cancel(ids[0]) }
            }
        } onCancel: {
            if let id = single.cancellationRequested() { cancel(id) }
        }
    }
}
