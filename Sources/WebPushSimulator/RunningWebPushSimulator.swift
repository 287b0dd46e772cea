import Foundation

/// A simulator that is running: its origins, its CA, and the control API's operations. Thread-safe.
public final class RunningWebPushSimulator: Sendable {
    public let host: String
    /// Each origin's port, in the configuration's order.
    public let ports: [Int]
    public let controlPort: Int?
    /// The CA certificate (PEM) that signed every origin's certificate, and where it was written.
    public let caCertificatePEM: String
    public let caCertificatePath: String

    let core: WebPushSimulatorCore

    init(
        host: String,
        ports: [Int],
        controlPort: Int?,
        caCertificatePEM: String,
        caCertificatePath: String,
        core: WebPushSimulatorCore
    ) {
        self.host = host
        self.ports = ports
        self.controlPort = controlPort
        self.caCertificatePEM = caCertificatePEM
        self.caCertificatePath = caCertificatePath
        self.core = core
    }

    /// `https://127.0.0.1:PORT` for each origin: the VAPID `aud` each one expects.
    public var origins: [String] { ports.map { "https://\(host):\($0)" } }

    /// A new subscription on origin `originIndex`, as a browser makes one; with `applicationServerKey`
    /// (a VAPID public key, base64url) messages signed with any other key are refused with 403.
    public func createSubscription(
        originIndex: Int = 0,
        applicationServerKey: String? = nil
    ) throws(WebPushSimulatorError) -> WebPushSimulatorSubscription {
        try core.createSubscription(originIndex: originIndex, applicationServerKey: applicationServerKey)
    }

    /// Messages received (answered 201), oldest first; optionally for one subscription.
    public func received(subscriptionID: String? = nil) -> [WebPushReceivedMessage] {
        core.received(subscriptionID: subscriptionID)
    }

    /// Later messages to the subscription are answered `status` (404 or 410).
    public func expire(subscriptionID: String, status: Int = 410) throws(WebPushSimulatorError) {
        try core.expire(subscriptionID, status: status)
    }

    /// Answers `answer` to the next matching messages that pass the checks.
    public func script(_ answer: WebPushScriptedAnswer) throws(WebPushSimulatorError) { try core.script(answer) }

    /// Holds every later push answer this long.
    public func setLatency(milliseconds: Int) { core.setLatency(milliseconds: milliseconds) }
    public func stats() -> WebPushSimulatorStats { core.state.withLock { $0.stats } }
    /// The connections origin `originIndex` accepted (nil: every origin together): opened, open now, the
    /// most at once.
    public func connections(originIndex: Int?) -> WebPushSimulatorConnections {
        let key = originIndex ?? WebPushSimulatorConnectionCounter.allOrigins
        return core.state.withLock { $0.connections[key] ?? WebPushSimulatorConnections() }
    }
    /// Forgets messages, scripted answers, expiries and counters (not subscriptions).
    public func reset() { core.reset() }
}
