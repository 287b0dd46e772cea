/// When a request is complete, decided once for every store: the store reads the request's state and
/// whether anything is still outstanding, asks ``finalState``, and writes what it answers.
///
/// A request is done when every target is cut into chunks, no chunk is still open and no retry is
/// pending; a request already finished (done or expired) stays as it is.
package struct RequestCompletion: Hashable, Sendable {
    /// `request.state` as stored (a ``StoredForm/RequestStateCode`` raw value).
    package var state: Int64
    /// Every target of the request is in a chunk (`request.cut_done`).
    package var cutDone: Bool
    /// Some chunk of the request is still open (leased, or waiting for a takeover).
    package var hasOpenChunks: Bool
    /// Some target of the request still waits for a retry.
    package var hasPendingRetries: Bool

    package init(state: Int64, cutDone: Bool, hasOpenChunks: Bool, hasPendingRetries: Bool) {
        self.state = state
        self.cutDone = cutDone
        self.hasOpenChunks = hasOpenChunks
        self.hasPendingRetries = hasPendingRetries
    }

    /// The state to write (with the finish time), or nil when the request is not complete or was
    /// finished already.
    package var finalState: StoredForm.RequestStateCode? {
        guard state < StoredForm.RequestStateCode.done.rawValue, cutDone, !hasOpenChunks, !hasPendingRetries else {
            return nil
        }
        return .done
    }
}
