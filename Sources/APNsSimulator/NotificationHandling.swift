/// How the simulator decides each notification request.
public enum NotificationHandling: Sendable {
    /// Answer 200 to every request whose path names a device (the benchmark fast path: no header,
    /// credential or payload checks). Devices marked unregistered or bad still get their answers.
    case acceptAll
    /// Check the request as Apple documents it (see `APNsSimulator` docs for the order and the
    /// reasons), then the device's state. The default.
    case validating
    /// Ask a closure, for fault and edge-case tests. Runs on the connection's event loop: keep it
    /// quick and non-blocking.
    case scripted(@Sendable (SimulatedRequest) -> SimulatedVerdict)
}

/// A request as a scripted handler sees it.
public struct SimulatedRequest: Sendable {
    /// The token in `:path`, when the path has the `/3/device/` form.
    public var deviceToken: String?
    /// Headers including pseudo-headers (`:method`, `:path`), one value per name.
    public var headers: [String: String]
    public var payload: [UInt8]
    public var connectionID: Int
    public var streamID: Int
    /// How many requests this connection has completed before this one.
    public var requestIndexOnConnection: Int
}

/// A scripted handler's answer.
public enum SimulatedVerdict: Sendable {
    /// 200, recorded like any accepted notification.
    case accept
    /// This status and reason.
    case reject(SimulatedRejection)
    /// Whatever the validating handler would answer.
    case validate
    /// Never answer this request.
    case noAnswer
}
