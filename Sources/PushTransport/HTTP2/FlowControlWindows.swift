/// The connection-wide HTTP/2 flow-control state (RFC 9113 §6.9) as a value: what may still be sent on
/// the connection, the initial window of each new stream, the peer's largest frame, and what was
/// received but not yet acknowledged with WINDOW_UPDATE. Per-stream send windows live with the streams.
public struct FlowControlWindows: Sendable, Hashable {
    public private(set) var connectionSend = HTTP2Wire.defaultInitialWindowSize
    public private(set) var initialStreamSend = HTTP2Wire.defaultInitialWindowSize
    public var peerMaximumFrameSize = HTTP2Wire.defaultMaximumFrameSize
    public private(set) var unacknowledgedInbound = 0

    /// Received bytes are acknowledged once at least this many are owed (one WINDOW_UPDATE, not one per frame).
    public static let acknowledgementThreshold = 32_768

    public init() {}

    /// WINDOW_UPDATE on stream 0; a window above 2^31-1 is a connection error.
    public mutating func connectionWindowUpdate(_ increment: UInt32) throws(HTTP2ConnectionError) {
        connectionSend += Int(increment)
        guard connectionSend <= HTTP2Wire.maximumWindowSize else {
            throw HTTP2ConnectionError(code: .flowControlError, message: "connection window above 2^31-1")
        }
    }

    /// SETTINGS_INITIAL_WINDOW_SIZE: returns how far every open stream's window moves (§6.9.2, even below zero).
    public mutating func initialStreamWindowChanged(to value: UInt32) -> Int {
        let delta = Int(value) - initialStreamSend
        initialStreamSend = Int(value)
        return delta
    }

    /// Bytes of `length` that may go in one DATA frame now, on a stream whose window is `streamWindow`.
    public func sendable(_ length: Int, streamWindow: Int) -> Int {
        min(length, connectionSend, streamWindow, peerMaximumFrameSize)
    }

    public mutating func sent(_ length: Int) {
        connectionSend -= length
    }

    public mutating func received(_ length: Int) {
        unacknowledgedInbound += length
    }

    /// The connection WINDOW_UPDATE increment to send now, if enough is owed; it is then no longer owed.
    public mutating func takeAcknowledgement() -> Int? {
        guard unacknowledgedInbound >= Self.acknowledgementThreshold else { return nil }
        defer { unacknowledgedInbound = 0 }
        return unacknowledgedInbound
    }
}
