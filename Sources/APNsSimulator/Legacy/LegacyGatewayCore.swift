public import Foundation
import Logging
import NIOCore
import Synchronization

/// A notification the simulated legacy gateway accepted.
public struct LegacyRecordedNotification: Sendable, Hashable {
    /// 0 simple, 1 enhanced, 2 frame.
    public var command: UInt8
    public var identifier: UInt32?
    public var expiry: UInt32?
    public var priority: UInt8?
    /// Lowercase hex.
    public var deviceToken: String
    public var payload: [UInt8]
    /// Numbered from 1 in accept order, across both legacy ports.
    public var connectionID: Int
    public var arrivalTime: Date

    public var payloadString: String { String(decoding: payload, as: UTF8.self) }
}

/// Counters of the simulated legacy gateway and feedback service.
public struct LegacyGatewayStats: Sendable, Equatable {
    /// Notifications read (accepted, rejected, or discarded for an unregistered device).
    public var received = 0
    public var accepted = 0
    /// Error responses sent, by status (Shutdown included).
    public var errorResponsesByStatus: [UInt8: Int] = [:]
    /// Accepted notifications that repeated an earlier one to the same device (same payload bytes).
    public var duplicates = 0
    /// Notifications to a device marked unregistered: accepted silently, as Apple's gateway did,
    /// and reported on the feedback port instead.
    public var discardedUnregistered = 0
    public var connectionsOpened = 0
    public var connectionsActive = 0
    /// Connections refused after the TLS handshake (no client certificate where one is required).
    public var connectionsRefused = 0
    public var feedbackConnections = 0
    public var feedbackTuplesServed = 0

    public init() {}
}

/// One-shot faults of the legacy gateway: each applies to the next connection that reaches the count,
/// then clears itself.
public struct LegacyGatewayFaults: Sendable, Equatable {
    /// After accepting this many notifications on one connection, answer Shutdown (status 10) naming
    /// the last one and close.
    public var shutdownAfter: Int?
    /// After accepting this many notifications on one connection, close it without an error response.
    public var dropAfter: Int?

    public init(shutdownAfter: Int? = nil, dropAfter: Int? = nil) {
        self.shutdownAfter = shutdownAfter
        self.dropAfter = dropAfter
    }
}

/// State of the legacy gateway and feedback ports shared by their connections. Thread-safe.
final class LegacyGatewayCore: Sendable {
    struct LiveConnection: Sendable {
        let eventLoop: any EventLoop
        let handler: NIOLoopBound<LegacyGatewayHandler>
    }

    private struct Storage: Sendable {
        var stats = LegacyGatewayStats()
        var records: [LegacyRecordedNotification] = []
        var deliveries: [String: Int] = [:]
        var seen: Set<DeliveryIdentity> = []
        var faults = LegacyGatewayFaults()
    }

    let devices: DeviceRegistry
    let clock: any SimulatorClock
    let recordLimit: Int
    let requiresClientCertificate: Bool
    /// Token keys but no client CA: the legacy ports cannot authenticate anyone.
    let refusesEveryone: Bool
    let logger: Logger
    private let storage = Mutex(Storage())
    private let connections = Mutex<[Int: LiveConnection]>([:])
    private let nextConnectionID = Atomic<Int>(1)

    init(
        devices: DeviceRegistry,
        clock: any SimulatorClock,
        recordLimit: Int,
        requiresClientCertificate: Bool,
        hasTokenKeys: Bool,
        logger: Logger
    ) {
        self.devices = devices
        self.clock = clock
        self.recordLimit = recordLimit
        self.requiresClientCertificate = requiresClientCertificate
        self.refusesEveryone = hasTokenKeys && !requiresClientCertificate
        self.logger = logger
    }

    func makeConnectionID() -> Int { nextConnectionID.wrappingAdd(1, ordering: .relaxed).oldValue }

    // MARK: Connections

    func register(_ id: Int, _ connection: LiveConnection) {
        connections.withLock { $0[id] = connection }
        storage.withLock {
            $0.stats.connectionsOpened += 1
            $0.stats.connectionsActive += 1
        }
    }

    func unregister(_ id: Int) {
        guard connections.withLock({ $0.removeValue(forKey: id) }) != nil else { return }
        storage.withLock { $0.stats.connectionsActive -= 1 }
    }

    /// Every live gateway connection answers Shutdown naming the last notification it processed, and closes.
    func sendShutdown() {
        for connection in connections.withLock({ Array($0.values) }) {
            let handler = connection.handler
            connection.eventLoop.execute { handler.value.shutDown() }
        }
    }

    /// Closes every live gateway connection without an error response.
    func dropConnections() {
        for connection in connections.withLock({ Array($0.values) }) {
            let handler = connection.handler
            connection.eventLoop.execute { handler.value.drop() }
        }
    }

    // MARK: Faults

    var faults: LegacyGatewayFaults {
        get { storage.withLock { $0.faults } }
        set { storage.withLock { $0.faults = newValue } }
    }

    enum FaultAction { case none, shutdown, drop }

    /// Whether a connection that has now accepted `count` notifications is cut; a fault fires once.
    func faultAfterAccepting(_ count: Int) -> FaultAction {
        storage.withLock { storage in
            if let limit = storage.faults.shutdownAfter, count >= limit {
                storage.faults.shutdownAfter = nil
                return .shutdown
            }
            if let limit = storage.faults.dropAfter, count >= limit {
                storage.faults.dropAfter = nil
                return .drop
            }
            return .none
        }
    }

    var hasFaults: Bool { storage.withLock { $0.faults != LegacyGatewayFaults() } }

    // MARK: Recording

    struct Batch {
        var received = 0
        var accepted: [LegacyRecordedNotification] = []
        var discardedUnregistered = 0
        var errorStatus: UInt8?
        var refused = false
    }

    func commit(_ batch: Batch) {
        storage.withLock { storage in
            storage.stats.received += batch.received
            storage.stats.discardedUnregistered += batch.discardedUnregistered
            if let status = batch.errorStatus { storage.stats.errorResponsesByStatus[status, default: 0] += 1 }
            if batch.refused { storage.stats.connectionsRefused += 1 }
            for record in batch.accepted {
                storage.stats.accepted += 1
                storage.deliveries[record.deviceToken, default: 0] += 1
                let identity = DeliveryIdentity(device: DeviceKey(record.deviceToken), key: record.payload.hashValue)
                if !storage.seen.insert(identity).inserted { storage.stats.duplicates += 1 }
                if storage.records.count < recordLimit { storage.records.append(record) }
            }
        }
    }

    func feedbackServed(tuples: Int) {
        storage.withLock {
            $0.stats.feedbackConnections += 1
            $0.stats.feedbackTuplesServed += tuples
        }
    }

    func stats() -> LegacyGatewayStats {
        var stats = storage.withLock { $0.stats }
        stats.connectionsActive = connections.withLock { $0.count }
        return stats
    }

    func notifications(device: String?) -> [LegacyRecordedNotification] {
        let key = device?.lowercased()
        return storage.withLock { storage in
            guard let key else { return storage.records }
            return storage.records.filter { $0.deviceToken == key }
        }
    }

    func deliveries(device: String) -> Int {
        storage.withLock { $0.deliveries[device.lowercased()] ?? 0 }
    }

    func reset() {
        storage.withLock { $0 = Storage() }
    }
}
