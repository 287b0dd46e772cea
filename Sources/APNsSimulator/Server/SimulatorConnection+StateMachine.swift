/// The decisions of one simulated APNs connection about GOAWAY and dropping, as a pure state
/// machine (no channel, no clock). The connection handler feeds it events and carries out the
/// actions.
///
/// Semantics:
/// - **GOAWAY after N streams**: when the connection's N-th stream opens (or any later one, if
///   the fault was set after the N-th), send GOAWAY with last-stream-id = that stream. Streams up
///   to it are answered; streams above it get no answer at all (as a real server behaves). Once
///   every stream up to it is answered (or reset by the client), close the connection.
/// - **Drop after N streams**: once N streams are answered, close the connection at once, with no
///   GOAWAY; streams still open never get an answer. N = 0 drops new connections on accept.
struct SimulatorConnectionStateMachine: Sendable {
    private enum State: Sendable {
        case active
        case goingAway(lastStreamID: Int)
        case closed
    }

    enum StreamOpenedAction: Equatable, Sendable {
        /// Process the request.
        case process
        /// Send GOAWAY(lastStreamID) first, then process the request.
        case sendGoAwayAndProcess(lastStreamID: Int)
        /// The stream is above the last stream ID (or the connection is closing): never answer.
        case ignore
    }

    enum StreamFinishedAction: Equatable, Sendable {
        case none
        /// Close the connection after flushing what was written.
        case close
    }

    private var state: State = .active
    private var openStreams: Set<Int> = []
    private(set) var streamsOpened = 0
    private(set) var streamsAnswered = 0

    init() {}

    /// Whether a connection should be closed as soon as it is accepted.
    static func dropsOnAccept(dropAfterStreams: Int?) -> Bool {
        dropAfterStreams == 0
    }

    mutating func streamOpened(id: Int, goAwayAfterStreams: Int?) -> StreamOpenedAction {
        switch self.state {
        case .closed:
            return .ignore
        case .goingAway(let lastStreamID):
            guard id <= lastStreamID else { return .ignore }
            self.openStreams.insert(id)
            self.streamsOpened += 1
            return .process
        case .active:
            self.openStreams.insert(id)
            self.streamsOpened += 1
            if let limit = goAwayAfterStreams, self.streamsOpened >= max(limit, 1) {
                self.state = .goingAway(lastStreamID: id)
                return .sendGoAwayAndProcess(lastStreamID: id)
            }
            return .process
        }
    }

    /// The response to stream `id` was written.
    mutating func streamAnswered(id: Int, dropAfterStreams: Int?) -> StreamFinishedAction {
        guard self.openStreams.remove(id) != nil else { return .none }
        self.streamsAnswered += 1
        if case .closed = self.state { return .none }
        if let limit = dropAfterStreams, limit > 0, self.streamsAnswered >= limit {
            self.state = .closed
            return .close
        }
        return self.closeIfDrained()
    }

    /// Stream `id` closed without an answer (reset by the client, or dropped by GOAWAY).
    mutating func streamClosedUnanswered(id: Int) -> StreamFinishedAction {
        guard self.openStreams.remove(id) != nil else { return .none }
        return self.closeIfDrained()
    }

    /// The connection is closing for another reason (drop-now, shutdown).
    mutating func closing() {
        self.state = .closed
    }

    func isOpen(_ id: Int) -> Bool {
        self.openStreams.contains(id)
    }

    var openStreamCount: Int {
        self.openStreams.count
    }

    /// The connection is gone: no stream will be answered.
    mutating func forgetOpenStreams() {
        self.openStreams.removeAll()
    }

    var isClosed: Bool {
        if case .closed = self.state { return true }
        return false
    }

    private mutating func closeIfDrained() -> StreamFinishedAction {
        guard case .goingAway(let lastStreamID) = self.state else { return .none }
        if self.openStreams.contains(where: { $0 <= lastStreamID }) { return .none }
        self.state = .closed
        return .close
    }
}
