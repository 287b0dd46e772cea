public import Foundation

/// A notification the simulator accepted (answered 200).
public struct RecordedNotification: Sendable, Hashable {
    /// The device token as it appeared in `:path`.
    public var deviceToken: String
    /// The request's headers (regular and pseudo), one value per name.
    public var headers: [String: String]
    /// The payload bytes as received.
    public var payload: [UInt8]
    /// The `apns-id` the simulator answered with (the request's, or a generated one).
    public var apnsID: String
    /// When the request completed, on the simulator's clock.
    public var arrivalTime: Date
    /// The connection that carried it (numbered from 1 in accept order).
    public var connectionID: Int
    public var streamID: Int

    public init(
        deviceToken: String,
        headers: [String: String],
        payload: [UInt8],
        apnsID: String,
        arrivalTime: Date,
        connectionID: Int,
        streamID: Int
    ) {
        self.deviceToken = deviceToken
        self.headers = headers
        self.payload = payload
        self.apnsID = apnsID
        self.arrivalTime = arrivalTime
        self.connectionID = connectionID
        self.streamID = streamID
    }

    public var topic: String? { self.headers["apns-topic"] }
    public var pushType: String? { self.headers["apns-push-type"] }
    public var payloadString: String { String(decoding: self.payload, as: UTF8.self) }
}

/// Counters of a running simulator.
public struct SimulatorStats: Sendable, Equatable {
    /// Requests completed (accepted + rejected + left unanswered by blackhole).
    public var received = 0
    public var accepted = 0
    public var rejected = 0
    public var rejectedByReason: [String: Int] = [:]
    /// Requests held forever by the blackhole fault.
    public var blackholed = 0
    /// Full records kept (at most `recordLimit`).
    public var recorded = 0
    public var connectionsOpened = 0
    public var connectionsActive = 0
    /// Streams opened and not yet answered or closed, over all connections.
    public var currentStreams = 0
    /// The most streams open at once over all connections, since start or the last reset.
    public var peakStreams = 0
    /// The most streams open at once on each connection (by the ID recorded with its
    /// notifications) that had a stream open since start or the last reset.
    public var peakStreamsByConnection: [Int: Int] = [:]
    public var goAwaysSent = 0
    /// Distinct devices with at least one accepted notification (0 when device tracking is off).
    public var devices = 0
    /// Accepted notifications that repeated an earlier one to the same device (same `apns-id`
    /// when the request carried one, else the same payload bytes).
    public var duplicates = 0

    public init() {}
}

/// Deliveries to one device.
public struct DeviceDeliveries: Sendable, Equatable {
    public var accepted: Int
    public var duplicates: Int

    public init(accepted: Int, duplicates: Int) {
        self.accepted = accepted
        self.duplicates = duplicates
    }
}
