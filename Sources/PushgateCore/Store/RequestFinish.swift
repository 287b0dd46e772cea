/// Marking a request done when it is complete (what the stores call `finishIfDone`, after a chunk or a
/// retry ends) as a state machine, the same for every store: read what completion depends on, decide
/// (``RequestCompletion``), and only then write. Pure: the store runs each ``Action`` with its SQL in
/// the transaction of the change that may have completed the request.
package struct RequestFinish: Sendable {
    package enum Action: Sendable, Hashable {
        /// Read the request's state, `cut_done`, and whether it has an open chunk or a pending retry
        /// (PostgreSQL: lock its row `FOR UPDATE` first, so that two instances completing its last two
        /// chunks at once take turns); then ``completionRead(_:)``, with nil when it is gone.
        case readCompletion(seq: Int64)
        /// Write the request's final state, finished at `nowMillis`; then ``marked()``.
        case markFinished(seq: Int64, StoredForm.RequestStateCode, nowMillis: Int64)
        /// A finished request's records of removed targets are no longer read: delete them; then
        /// ``forgotten()``.
        case forgetRemovedTargets(seq: Int64)
        /// Done (whether or not the request was complete).
        case finished
    }

    private enum State: Sendable {
        case idle
        case reading
        case marking
        case forgetting
        case finished
    }

    package let seq: Int64
    package let nowMillis: Int64
    private var state = State.idle

    package init(seq: Int64, nowMillis: Int64) {
        self.seq = seq
        self.nowMillis = nowMillis
    }

    package mutating func start() -> Action {
        guard case .idle = state else { preconditionFailure("a finish starts once") }
        state = .reading
        return .readCompletion(seq: seq)
    }

    /// The answer to ``Action/readCompletion(seq:)``.
    package mutating func completionRead(_ completion: RequestCompletion?) -> Action {
        guard case .reading = state else { preconditionFailure("completion read unasked") }
        guard let final = completion?.finalState else { return finish() }
        state = .marking
        return .markFinished(seq: seq, final, nowMillis: nowMillis)
    }

    package mutating func marked() -> Action {
        guard case .marking = state else { preconditionFailure("marked unasked") }
        state = .forgetting
        return .forgetRemovedTargets(seq: seq)
    }

    package mutating func forgotten() -> Action {
        guard case .forgetting = state else { preconditionFailure("forgotten unasked") }
        return finish()
    }

    private mutating func finish() -> Action {
        state = .finished
        return .finished
    }
}
