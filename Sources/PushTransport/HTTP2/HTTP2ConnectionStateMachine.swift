public import NIOCore
public import NIOHTTP2

/// The decisions of one HTTP/2 client connection to a push service (APNs, FCM): which stream ids are
/// open, how many more the server lets us open, what GOAWAY means for each open stream, when to ping and when to close.
///
/// It holds no channel and reads no clock: the handler feeds it events with the current time and
/// carries out the actions it returns. Tests replay transcripts.
public struct HTTP2ConnectionStateMachine: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// Send a PING after this long without reading anything (nil: never). The C pushd's `-t`.
        public var pingInterval: TimeAmount?
        /// Close the connection if a PING is not acknowledged within this time.
        public var pingTimeout: TimeAmount
        /// Close the connection after this long without any request (nil: never). The C pushd's `-i`.
        public var idleTimeout: TimeAmount?
        /// Never open more than this many concurrent streams, whatever the server allows (nil: the server's limit).
        public var maximumStreams: Int?
        /// The highest client stream id this connection may use (RFC 9113 §5.1.1: 2^31 - 1). At 100,000
        /// notifications a second one connection runs out of ids in about three hours; then it is
        /// retired and a fresh one takes over. Lower only in tests.
        public var lastUsableStreamID: Int32

        public init(
            pingInterval: TimeAmount? = .minutes(60),
            pingTimeout: TimeAmount = .seconds(20),
            idleTimeout: TimeAmount? = .hours(24),
            maximumStreams: Int? = nil,
            lastUsableStreamID: Int32 = .max
        ) {
            self.pingInterval = pingInterval
            self.pingTimeout = pingTimeout
            self.idleTimeout = idleTimeout
            self.maximumStreams = maximumStreams
            self.lastUsableStreamID = lastUsableStreamID
        }
    }

    public enum State: Sendable, Hashable {
        /// TLS is up but the server's first SETTINGS frame has not arrived: no stream may be opened yet.
        case awaitingSettings
        case active
        /// GOAWAY received: no new streams; the open ones at or below `lastStreamID` may still be answered.
        case goingAway(lastStreamID: HTTP2StreamID)
        /// We decided to close (idle, ping timeout, drained after GOAWAY, shutdown).
        case closing
        case closed
    }

    public enum SettingsAction: Sendable, Hashable {
        /// The first SETTINGS: the connection is usable with this many streams.
        case becameReady(availableStreams: Int)
        /// The server changed its limit.
        case capacityChanged(availableStreams: Int)
        case none
    }

    public enum GoAwayAction: Sendable, Hashable {
        /// `unprocessed`: streams above the last stream id, which the server never processed (RFC 9113 §6.8):
        /// retry them elsewhere. `awaiting`: how many open streams may still be answered.
        /// `closeNow`: nothing is left to wait for.
        case retire(unprocessed: [HTTP2StreamID], awaiting: Int, closeNow: Bool)
        /// A second GOAWAY that changes nothing we act on.
        case none
    }

    public enum StreamClosedAction: Sendable, Hashable {
        case none
        /// GOAWAY was received, or we asked to close, and this was the last open stream: close now.
        case closeConnection
    }

    public enum TickAction: Sendable, Hashable {
        case none
        case sendPing
        /// No request for `idleTimeout`: close quietly.
        case closeIdle
        /// The peer did not answer our PING: the connection is dead.
        case closePingTimedOut
    }

    public private(set) var state: State = .awaitingSettings
    private let configuration: Configuration
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS. HTTP/2 says "unlimited" until the server says
    /// otherwise, but Apple says not to assume a number and to allow only one stream on a token
    /// connection until a token has been accepted, so we start at one until SETTINGS arrive.
    private var remoteMaximumStreams: Int = 1
    /// A set of ids, kept in the handler's kind of table: a stream opens and closes per notification.
    private var openStreams = InFlightStreams<Void>()
    /// Int, not `HTTP2StreamID`: it passes `Int32.max` when the last id is used.
    private var nextStreamID = 1
    private var lastRequestActivity: NIODeadline
    private var lastReadActivity: NIODeadline
    private var pingSentAt: NIODeadline?

    public init(configuration: Configuration, now: NIODeadline) {
        self.configuration = configuration
        self.lastRequestActivity = now
        self.lastReadActivity = now
    }

    /// How many more streams may be opened now.
    public var availableStreams: Int {
        guard case .active = state else { return 0 }
        return max(0, min(effectiveMaximumStreams - openStreams.count, unusedStreamIDs))
    }

    /// Client stream ids (odd) not used yet.
    private var unusedStreamIDs: Int {
        let last = Int(configuration.lastUsableStreamID)
        return nextStreamID > last ? 0 : (last - nextStreamID) / 2 + 1
    }

    /// Every stream id is used: the connection must be retired (it can finish its open streams).
    public var streamIDsExhausted: Bool { unusedStreamIDs == 0 }

    /// The concurrency limit in force: the server's, lowered by our own cap.
    public var effectiveMaximumStreams: Int {
        if let cap = configuration.maximumStreams { return min(cap, remoteMaximumStreams) }
        return remoteMaximumStreams
    }

    public var openStreamCount: Int { openStreams.count }

    public func isOpen(_ streamID: HTTP2StreamID) -> Bool { openStreams.contains(streamID) }

    // MARK: Events

    public mutating func settingsReceived(maximumConcurrentStreams: Int?, now: NIODeadline) -> SettingsAction {
        lastReadActivity = now
        let previous = availableStreams
        if let maximumConcurrentStreams { remoteMaximumStreams = maximumConcurrentStreams }
        switch state {
        case .awaitingSettings:
            if maximumConcurrentStreams == nil {
                // No limit announced: HTTP/2's "unlimited". Use a large but finite default.
                remoteMaximumStreams = 1000
            }
            state = .active
            return .becameReady(availableStreams: availableStreams)
        case .active:
            return availableStreams == previous ? .none : .capacityChanged(availableStreams: availableStreams)
        case .goingAway, .closing, .closed:
            return .none
        }
    }

    /// Opens the next stream. Call only when `availableStreams > 0`.
    public mutating func openStream(now: NIODeadline) -> HTTP2StreamID {
        precondition(availableStreams > 0, "no stream available")
        let id = HTTP2StreamID(Int32(nextStreamID))
        nextStreamID += 2
        openStreams.insert((), for: id)
        lastRequestActivity = now
        return id
    }

    /// A stream ended: answered, reset, or abandoned by us (deadline, cancel).
    public mutating func streamClosed(_ id: HTTP2StreamID, now: NIODeadline) -> StreamClosedAction {
        guard openStreams.remove(id) != nil else { return .none }
        lastRequestActivity = now
        guard openStreams.isEmpty else { return .none }
        switch state {
        case .goingAway:
            state = .closing
            return .closeConnection
        case .closing:
            return .closeConnection
        default:
            return .none
        }
    }

    public mutating func frameRead(now: NIODeadline) {
        lastReadActivity = now
    }

    public mutating func goAwayReceived(lastStreamID: HTTP2StreamID, now: NIODeadline) -> GoAwayAction {
        lastReadActivity = now
        switch state {
        case .awaitingSettings, .active:
            break
        case .goingAway(let previous):
            // A later GOAWAY may only lower the last stream id.
            guard lastStreamID < previous else { return .none }
        case .closing, .closed:
            return .none
        }
        state = .goingAway(lastStreamID: lastStreamID)
        let unprocessed = openStreams.ids(where: { _ in true }).filter { $0 > lastStreamID }
        for id in unprocessed { openStreams.remove(id) }
        let closeNow = openStreams.isEmpty
        if closeNow { state = .closing }
        return .retire(unprocessed: unprocessed, awaiting: openStreams.count, closeNow: closeNow)
    }

    public mutating func pingAcknowledged(now: NIODeadline) {
        lastReadActivity = now
        pingSentAt = nil
    }

    /// The periodic check. Returns at most one action.
    public mutating func tick(now: NIODeadline) -> TickAction {
        switch state {
        case .active, .goingAway: break
        case .awaitingSettings:
            // A server that never sends SETTINGS is as dead as one that never answers a PING.
            if now - lastReadActivity >= configuration.pingTimeout {
                state = .closing
                return .closePingTimedOut
            }
            return .none
        case .closing, .closed: return .none
        }
        // Dead only when nothing at all was read for the ping timeout since the PING: a connection whose
        // answers keep arriving is alive, however late the acknowledgement (a busy peer, or a busy host
        // that has not read it yet). Closing it would cut its streams unanswered.
        if let pingSentAt, now - pingSentAt >= configuration.pingTimeout,
            now - lastReadActivity >= configuration.pingTimeout
        {
            state = .closing
            return .closePingTimedOut
        }
        if let idle = configuration.idleTimeout, openStreams.isEmpty, now - lastRequestActivity >= idle {
            state = .closing
            return .closeIdle
        }
        if let interval = configuration.pingInterval, pingSentAt == nil, now - lastReadActivity >= interval {
            pingSentAt = now
            return .sendPing
        }
        return .none
    }

    /// We decided to close (shutdown, a connection-fatal answer). No new streams from now on; the
    /// open ones may finish. Returns true when nothing is open and the channel can close at once.
    public mutating func closeRequested() -> Bool {
        switch state {
        case .closed: return false
        default:
            state = .closing
            return openStreams.isEmpty
        }
    }

    /// The channel is gone. Returns the streams that were still open: they got no answer.
    public mutating func channelClosed() -> [HTTP2StreamID] {
        state = .closed
        return openStreams.removeAll().map(\.id)
    }

    /// The earliest time at which `tick` could return something other than `.none`; lets the
    /// handler schedule its next timer instead of polling.
    public func nextTickDeadline() -> NIODeadline? {
        var candidates: [NIODeadline] = []
        if let pingSentAt { candidates.append(max(pingSentAt, lastReadActivity) + configuration.pingTimeout) }
        if case .awaitingSettings = state { candidates.append(lastReadActivity + configuration.pingTimeout) }
        if let idle = configuration.idleTimeout, openStreams.isEmpty { candidates.append(lastRequestActivity + idle) }
        if let interval = configuration.pingInterval, pingSentAt == nil {
            candidates.append(lastReadActivity + interval)
        }
        return candidates.min()
    }
}
