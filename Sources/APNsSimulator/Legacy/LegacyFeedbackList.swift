import Synchronization

/// The devices the feedback service will report: every device marked unregistered (with the time of
/// marking, in UNIX seconds) and not yet read by a feedback client. Apple's service reported a device
/// once and then forgot it; so does this one.
final class LegacyFeedbackList: Sendable {
    struct Entry: Sendable, Hashable {
        /// The token bytes (8 to 100, as the tuple's 2-byte length allows and Apple issued).
        var token: [UInt8]
        var timestampSeconds: UInt32
    }

    private let pending = Mutex<[DeviceKey: Entry]>([:])

    /// Called for every device-state change: unregistered devices join the list, any other state
    /// (bad, normal again) leaves it.
    func deviceStateChanged(token: String, unregisteredAtMilliseconds: Int64?) {
        let key = DeviceKey(token)
        guard let milliseconds = unregisteredAtMilliseconds, let bytes = Self.bytes(ofHex: token) else {
            pending.withLock { _ = $0.removeValue(forKey: key) }
            return
        }
        let seconds = UInt32(clamping: max(0, milliseconds / 1000))
        pending.withLock { $0[key] = Entry(token: bytes, timestampSeconds: seconds) }
    }

    /// Takes every pending entry, oldest first: they are not reported again.
    func take() -> [Entry] {
        let entries = pending.withLock { pending in
            defer { pending.removeAll() }
            return Array(pending.values)
        }
        return entries.sorted {
            $0.timestampSeconds != $1.timestampSeconds
                ? $0.timestampSeconds < $1.timestampSeconds : $0.token.lexicographicallyPrecedes($1.token)
        }
    }

    /// Puts entries back whose delivery failed (the client went away mid-write), unless the device
    /// changed state meanwhile.
    func restore(_ entries: [Entry]) {
        pending.withLock { pending in
            for entry in entries {
                let key = DeviceKey(Self.hex(entry.token))
                if pending[key] == nil { pending[key] = entry }
            }
        }
    }

    func removeAll() {
        pending.withLock { $0.removeAll() }
    }

    var count: Int { pending.withLock { $0.count } }

    static func bytes(ofHex hex: String) -> [UInt8]? {
        let utf8 = Array(hex.utf8)
        guard utf8.count % 2 == 0, (16...200).contains(utf8.count) else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count / 2)
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var index = 0
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
