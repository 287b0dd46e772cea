public import NIOCore
public import PushgateCore

/// A request inside a transport's pool: the caller's submission, the pool's bookkeeping, and what the
/// plug-in remembers of the request's earlier attempts (its `Marks`), readable as the entry's own
/// properties (`entry.retriedAfterExpiredToken`).
///
/// Public and inlinable, like the HTTP/2 engine that carries it: every notification passes through
/// here several times, and a `package` member is reached through an unspecialised accessor from other
/// modules, which copies the whole submission (retaining each of its references) to read one field.
@dynamicMemberLookup
public struct PoolEntry<Submission: TransportSubmission, Marks: PoolEntryMarks>: TransportPooledRequest {
    public var request: Submission
    public let poolRequestID: UInt64
    public let deadline: NIODeadline
    /// Times it went back to the queue unanswered (never processed, or its fate unknown).
    public var resends = 0
    public var marks = Marks()

    @inlinable
    public var isExpress: Bool { request.isExpress }

    @inlinable
    public init(request: Submission, poolRequestID: UInt64, deadline: NIODeadline) {
        self.request = request
        self.poolRequestID = poolRequestID
        self.deadline = deadline
    }

    @inlinable
    public subscript<Value>(dynamicMember keyPath: WritableKeyPath<Marks, Value>) -> Value {
        get { marks[keyPath: keyPath] }
        set { marks[keyPath: keyPath] = newValue }
    }

    @inlinable
    public func fail(_ failure: PushTransportFailure) {
        request.fail(failure)
    }
}

/// What a plug-in remembers of a request's earlier attempts (flags such as "already resent once after
/// an expired token"); all unset for a new request.
public protocol PoolEntryMarks: Sendable {
    init()
}

/// For a plug-in that remembers nothing but the resend count.
public struct NoMarks: PoolEntryMarks {
    @inlinable public init() {}
}
