import NIOCore

/// The decisions of one HTTP/1.1 keep-alive connection to a push service: one request at a time (no
/// pipelining: an answer that never comes would hold every request behind it), when the next may be
/// written, when an idle connection closes, when an answer has waited too long.
///
/// It holds no channel and reads no clock: the handler passes the time with each event and carries out
/// what it returns. Tests replay transcripts.
struct WebPushHTTP1ConnectionStateMachine: Sendable, Hashable {
    enum State: Sendable, Hashable {
        /// Usable, nothing written; idle since then.
        case idle(since: NIODeadline)
        /// One request written, its answer awaited until `answerDeadline`.
        case busy(answerDeadline: NIODeadline)
        /// Closing: after the answer in flight (`afterAnswer`), or now.
        case closing(afterAnswer: Bool)
        case closed
    }

    enum AnswerAction: Sendable, Hashable {
        /// Ask the pool for the next request.
        case pullNext
        /// Close the connection (the server said `Connection: close`, or a close was asked for).
        case close
    }

    enum CloseAction: Sendable, Hashable {
        case closeNow
        /// An answer is awaited: close once it has arrived.
        case closeAfterAnswer
        case none
    }

    enum TickAction: Sendable, Hashable {
        case none
        /// Nothing written for the idle timeout: close.
        case closeIdle
        /// The answer did not come in time: fail the request, close (HTTP/1.1 cannot drop one request
        /// and keep the connection).
        case answerTimedOut
    }

    let idleTimeout: TimeAmount?
    private(set) var state: State

    init(idleTimeout: TimeAmount?, now: NIODeadline) {
        self.idleTimeout = idleTimeout
        self.state = .idle(since: now)
    }

    /// Whether a request may be written now.
    var mayWrite: Bool {
        if case .idle = state { return true }
        return false
    }

    var isAwaitingAnswer: Bool {
        switch state {
        case .busy, .closing(afterAnswer: true): true
        case .idle, .closing(afterAnswer: false), .closed: false
        }
    }

    mutating func requestWritten(answerDeadline: NIODeadline) {
        precondition(mayWrite, "HTTP/1.1: one request at a time")
        state = .busy(answerDeadline: answerDeadline)
    }

    /// The answer in flight is complete; `keepAlive` false when the server closes after it.
    mutating func answerCompleted(keepAlive: Bool, now: NIODeadline) -> AnswerAction {
        switch state {
        case .busy where keepAlive:
            state = .idle(since: now)
            return .pullNext
        case .busy, .closing(afterAnswer: true):
            state = .closing(afterAnswer: false)
            return .close
        case .idle, .closing(afterAnswer: false), .closed:
            // An answer nobody asked for: the server is confused; stop using the connection.
            state = .closing(afterAnswer: false)
            return .close
        }
    }

    /// Take nothing new (shutdown, credentials renewed): close now if idle, after the answer otherwise.
    mutating func closeRequested() -> CloseAction {
        switch state {
        case .idle:
            state = .closing(afterAnswer: false)
            return .closeNow
        case .busy:
            state = .closing(afterAnswer: true)
            return .closeAfterAnswer
        case .closing, .closed:
            return .none
        }
    }

    mutating func tick(now: NIODeadline) -> TickAction {
        switch state {
        case .idle(let since):
            guard let idleTimeout, now - since >= idleTimeout else { return .none }
            state = .closing(afterAnswer: false)
            return .closeIdle
        case .busy(let deadline):
            guard deadline <= now else { return .none }
            state = .closing(afterAnswer: false)
            return .answerTimedOut
        case .closing, .closed:
            return .none
        }
    }

    /// The channel closed. Returns whether an answer was still awaited (its request goes back to the pool).
    mutating func channelClosed() -> Bool {
        defer { state = .closed }
        return isAwaitingAnswer
    }
}
