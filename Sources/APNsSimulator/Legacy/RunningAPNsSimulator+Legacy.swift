extension RunningAPNsSimulator {
    /// Notifications the legacy gateway accepted (up to the record limit), oldest first; optionally
    /// for one device (hex, any case).
    public func legacyNotifications(device: String? = nil) -> [LegacyRecordedNotification] {
        self.core.legacy.notifications(device: device)
    }

    /// How many times the legacy gateway accepted a notification for this device.
    public func legacyDeliveries(device: String) -> Int {
        self.core.legacy.deliveries(device: device)
    }

    public func legacyStats() -> LegacyGatewayStats {
        self.core.legacy.stats()
    }

    /// The one-shot faults of the legacy gateway (see `LegacyGatewayFaults`).
    public var legacyFaults: LegacyGatewayFaults {
        get { self.core.legacy.faults }
        set { self.core.legacy.faults = newValue }
    }

    /// Every live legacy gateway connection answers Shutdown (status 10) naming the last notification
    /// it processed, then closes.
    public func sendLegacyShutdown() {
        self.core.legacy.sendShutdown()
    }

    /// Closes every live legacy gateway connection without an error response.
    public func dropLegacyConnections() {
        self.core.legacy.dropConnections()
    }

    /// Devices marked unregistered that the feedback port has not reported yet.
    public var pendingFeedbackCount: Int {
        self.core.devices.feedback.count
    }
}
