import Foundation
import Synchronization

/// Events one connection collected during a read burst, committed under one lock acquisition.
struct RecorderBatch: Sendable {
    struct Accepted: Sendable {
        var record: RecordedNotification?
        var deviceToken: String
        /// What makes two deliveries to one device the same notification.
        var deliveryKey: Int
    }

    var received = 0
    var blackholed = 0
    var accepted: [Accepted] = []
    var rejectedReasons: [String] = []

    var isEmpty: Bool {
        self.received == 0 && self.blackholed == 0 && self.accepted.isEmpty && self.rejectedReasons.isEmpty
    }
}

/// Keeps accepted notifications (up to `recordLimit` full records, counts beyond), rejection
/// counts and per-device delivery tallies. Cheap on the hot path: connections commit batches.
final class NotificationRecorder: Sendable {
    private struct Storage: Sendable {
        var records: [RecordedNotification] = []
        var received = 0
        var accepted = 0
        var rejected = 0
        var blackholed = 0
        var rejectedByReason: [String: Int] = [:]
        var devices: [DeviceKey: DeviceDeliveries] = [:]
        var deliveryKeys: Set<DeliveryIdentity> = []
        var duplicates = 0
    }

    let recordLimit: Int
    let tracksDevices: Bool
    private let storage = Mutex(Storage())
    /// Set once `recordLimit` records are kept, so connections stop building full records.
    private let full = Atomic<Bool>(false)

    init(recordLimit: Int, tracksDevices: Bool) {
        self.recordLimit = max(0, recordLimit)
        self.tracksDevices = tracksDevices
        self.full.store(self.recordLimit == 0, ordering: .relaxed)
    }

    /// Whether a new full record would be kept.
    var wantsRecords: Bool {
        !self.full.load(ordering: .relaxed)
    }

    func commit(_ batch: RecorderBatch) {
        guard !batch.isEmpty else { return }
        let limit = self.recordLimit
        let tracksDevices = self.tracksDevices
        let nowFull: Bool = self.storage.withLock { storage in
            storage.received += batch.received
            storage.blackholed += batch.blackholed
            storage.accepted += batch.accepted.count
            storage.rejected += batch.rejectedReasons.count
            for reason in batch.rejectedReasons {
                storage.rejectedByReason[reason, default: 0] += 1
            }
            for entry in batch.accepted {
                if let record = entry.record, storage.records.count < limit {
                    storage.records.append(record)
                }
                if tracksDevices {
                    let device = DeviceKey(entry.deviceToken)
                    let isNew = storage.deliveryKeys.insert(DeliveryIdentity(device: device, key: entry.deliveryKey))
                        .inserted
                    var tally = storage.devices[device] ?? DeviceDeliveries(accepted: 0, duplicates: 0)
                    tally.accepted += 1
                    if !isNew {
                        tally.duplicates += 1
                        storage.duplicates += 1
                    }
                    storage.devices[device] = tally
                }
            }
            return storage.records.count >= limit
        }
        if nowFull { self.full.store(true, ordering: .relaxed) }
    }

    func notifications(device: String?) -> [RecordedNotification] {
        self.storage.withLock { storage in
            guard let device else { return storage.records }
            let key = DeviceKey(device)
            return storage.records.filter { DeviceKey($0.deviceToken) == key }
        }
    }

    func deliveries(device: String) -> DeviceDeliveries {
        self.storage.withLock { $0.devices[DeviceKey(device)] } ?? DeviceDeliveries(accepted: 0, duplicates: 0)
    }

    /// Fills the recorder's part of `stats`.
    func fill(_ stats: inout SimulatorStats) {
        self.storage.withLock { storage in
            stats.received = storage.received
            stats.accepted = storage.accepted
            stats.rejected = storage.rejected
            stats.blackholed = storage.blackholed
            stats.rejectedByReason = storage.rejectedByReason
            stats.recorded = storage.records.count
            stats.devices = storage.devices.count
            stats.duplicates = storage.duplicates
        }
    }

    func reset() {
        self.storage.withLock { $0 = Storage() }
        self.full.store(self.recordLimit == 0, ordering: .relaxed)
    }
}

/// A device token as a compact, case-insensitive key: 32-byte (64 hex digit) tokens are stored
/// inline as four words, anything else by its lowercased text.
struct DeviceKey: Hashable, Sendable {
    private var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    private var other: String?

    init(_ token: String) {
        let utf8 = token.utf8
        guard utf8.count == 64 else {
            self.other = token.lowercased()
            return
        }
        var w0: UInt64 = 0
        var w1: UInt64 = 0
        var w2: UInt64 = 0
        var w3: UInt64 = 0
        var index = 0
        for byte in utf8 {
            let nibble: UInt64
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = UInt64(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = UInt64(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = UInt64(byte - UInt8(ascii: "A") + 10)
            default:
                self.other = token.lowercased()
                return
            }
            switch index / 16 {
            case 0: w0 = w0 << 4 | nibble
            case 1: w1 = w1 << 4 | nibble
            case 2: w2 = w2 << 4 | nibble
            default: w3 = w3 << 4 | nibble
            }
            index += 1
        }
        self.words = (w0, w1, w2, w3)
    }

    static func == (lhs: DeviceKey, rhs: DeviceKey) -> Bool {
        lhs.words == rhs.words && lhs.other == rhs.other
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(self.words.0)
        hasher.combine(self.words.1)
        hasher.combine(self.words.2)
        hasher.combine(self.words.3)
        hasher.combine(self.other)
    }
}

struct DeliveryIdentity: Hashable, Sendable {
    var device: DeviceKey
    var key: Int
}
