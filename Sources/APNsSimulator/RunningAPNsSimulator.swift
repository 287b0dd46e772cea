public import Foundation

/// A simulator that is running, as `APNsSimulator.withRunning` hands it out: where it listens,
/// its CA, and the operations of the control API. Thread-safe.
public final class RunningAPNsSimulator: Sendable {
    /// The address the listeners are bound to.
    public let host: String
    /// The bound HTTP/2 port.
    public let port: Int
    /// The bound control API port, when enabled.
    public let controlPort: Int?
    /// The bound legacy binary gateway port, when enabled (`Configuration.legacyPort`).
    public let legacyPort: Int?
    /// The bound legacy feedback port, when enabled (`Configuration.feedbackPort`).
    public let feedbackPort: Int?
    /// The CA certificate (PEM) that signed the server certificate (nil with `.pem`/`.files` TLS).
    public let caCertificatePEM: String?
    /// Where that CA certificate was written.
    public let caCertificatePath: String?
    /// The CA that issued the server certificate, with `.generated` or `.authority` TLS: use it
    /// to issue client certificates (the simulator trusts them only if the configuration's
    /// `clientCertificateAuthorityPEM` names this CA).
    public let certificateAuthority: SimulatorCertificateAuthority?

    let core: SimulatorCore

    init(
        host: String,
        port: Int,
        controlPort: Int?,
        legacyPort: Int? = nil,
        feedbackPort: Int? = nil,
        caCertificatePEM: String?,
        caCertificatePath: String?,
        certificateAuthority: SimulatorCertificateAuthority?,
        core: SimulatorCore
    ) {
        self.host = host
        self.port = port
        self.controlPort = controlPort
        self.legacyPort = legacyPort
        self.feedbackPort = feedbackPort
        self.caCertificatePEM = caCertificatePEM
        self.caCertificatePath = caCertificatePath
        self.certificateAuthority = certificateAuthority
        self.core = core
    }

    /// `host:port`, for URLs (IPv6 hosts in brackets).
    public var authority: String {
        self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)"
    }

    // MARK: Recorder

    /// Accepted notifications (up to the record limit), oldest first; optionally for one device.
    public func notifications(device: String? = nil) -> [RecordedNotification] {
        self.core.recorder.notifications(device: device)
    }

    public func stats() -> SimulatorStats {
        self.core.stats()
    }

    /// The common name of the client certificate each connection presented (when client certificates
    /// are checked), by the connection id its notifications are recorded with.
    public func clientCertificateNames() -> [Int: String] {
        self.core.clientCertificateNames
    }

    /// Accepted deliveries and duplicates for one device (zero when device tracking is off).
    public func deliveries(device: String) -> DeviceDeliveries {
        self.core.recorder.deliveries(device: device)
    }

    // MARK: Devices

    /// Later pushes to `token` get 410 `Unregistered` with `timestamp` (default: now on the clock).
    public func markUnregistered(_ token: String, at timestamp: Date? = nil) {
        let time = timestamp ?? self.core.clock.now()
        self.core.devices.set(.unregistered(timestampMilliseconds: time.millisecondsSince1970), for: token)
    }

    /// Later pushes to `token` get 400 `BadDeviceToken`.
    public func markBad(_ token: String) {
        self.core.devices.set(.bad, for: token)
    }

    /// Back to normal.
    public func clearDeviceState(_ token: String) {
        self.core.devices.set(nil, for: token)
    }

    // MARK: Faults

    public var faults: SimulatorFaults {
        self.core.faults
    }

    /// Replaces the faults (see `SimulatorFaults`); `seed` reseeds the error-rate generator.
    public func setFaults(_ faults: SimulatorFaults, seed: UInt64? = nil) throws {
        try self.core.setFaults(faults, seed: seed)
    }

    /// Changes some faults.
    public func updateFaults(_ change: (inout SimulatorFaults) -> Void) throws {
        var faults = self.core.faults
        change(&faults)
        try self.core.setFaults(faults)
    }

    /// Closes every live connection now (TCP close, no GOAWAY).
    public func dropAllConnections() {
        self.core.dropAllConnections()
    }

    /// Restarts the stream high-water marks (`peakStreams`, `peakStreamsByConnection`) from the
    /// streams open now, and nothing else.
    public func resetPeakStreams() {
        self.core.streams.resetPeaks()
    }

    /// Forgets notifications, counters, stream peaks and device states; restores the configured faults.
    public func reset() throws {
        try self.core.reset()
    }
}
