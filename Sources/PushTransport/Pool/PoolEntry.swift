package import NIOCore
package import PushgateCore

/// A request inside a transport's pool: the caller's submission, the pool's bookkeeping, and what the
/// plug-in remembers of the request's earlier attempts (its `Marks`), readable as the entry's own
/// properties (`entry.retriedAfterExpiredToken`).
@dynamicMemberLookup
package struct PoolEntry<Submission: TransportSubmission, Marks: PoolEntryMarks>: TransportPooledRequest {
    package var request: Submission
    package let poolRequestID: UInt64
    package let deadline: NIODeadline
    /// Times it went back to the queue unanswered (never processed, or its fate unknown).
    package var resends = 0
    package var marks = Marks()

    package init(request: Submission, poolRequestID: UInt64, deadline: NIODeadline) {
        self.request = request
        self.poolRequestID = poolRequestID
        self.deadline = deadline
    }

    package subscript<Value>(dynamicMember keyPath: WritableKeyPath<Marks, Value>) -> Value {
        get { marks[keyPath: keyPath] }
        set { marks[keyPath: keyPath] = newValue }
    }

    package func fail(_ failure: APNsTransportFailure) {
        request.fail(failure)
    }
}

/// What a plug-in remembers of a request's earlier attempts (flags such as "already resent once after
/// an expired token"); all unset for a new request.
package protocol PoolEntryMarks: Sendable {
    init()
}

/// For a plug-in that remembers nothing but the resend count.
package struct NoMarks: PoolEntryMarks {
    package init() {}
}
