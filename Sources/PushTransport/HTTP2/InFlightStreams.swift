public import NIOHTTP2

/// A connection's open streams by stream id, with what the connection keeps about each.
///
/// Every notification passes through here twice (written, answered), so this avoids what a
/// `Dictionary<HTTP2StreamID, Stream>` costs per operation: hashing the key, and copying the entry
/// out and back (a retain and a release of each of its references) on every read-modify-write.
/// A client's stream ids are odd and only increase, and at most the stream limit are open at once,
/// so stream `id` lives in slot `(id / 2) % ring.count`. A stream still open when its slot comes
/// round again (a slow answer among fast ones) moves to a small overflow dictionary; when that
/// happens often, the ring is too small for the stream limit and doubles.
public struct InFlightStreams<Stream> {
    /// Which stream each slot holds (0: none), apart from the streams themselves, so that finding
    /// a stream never copies one (a copy retains and releases every reference it holds).
    @usableFromInline var slotIDs: [Int32]
    @usableFromInline var slots: [Stream?]
    @usableFromInline var overflow: [HTTP2StreamID: Stream] = [:]
    @usableFromInline var storedCount = 0
    @inlinable public var count: Int { storedCount }
    /// The ring stops growing here (a stream limit far above any server's); beyond it, the overflow takes the rest.
    @inlinable public static var maximumRingSize: Int { 1 << 16 }

    @inlinable public var isEmpty: Bool { storedCount == 0 }
    @inlinable public var ringSize: Int { slots.count }
    @inlinable public var overflowCount: Int { overflow.count }

    /// - Parameter ringSize: rounded up to a power of two.
    @inlinable public init(ringSize: Int = 256) {
        var size = 1
        while size < ringSize { size <<= 1 }
        slotIDs = Array(repeating: 0, count: size)
        slots = Array(repeating: nil, count: size)
    }

    @inlinable func slotIndex(_ id: HTTP2StreamID) -> Int {
        Int(Int32(id) >> 1) & (slots.count - 1)
    }

    @inlinable
    public func contains(_ id: HTTP2StreamID) -> Bool {
        if slotIDs[slotIndex(id)] == Int32(id) { return true }
        return !overflow.isEmpty && overflow.index(forKey: id) != nil
    }

    /// Adds a stream that is not here yet. Stream ids must increase from one insert to the next.
    @inlinable
    public mutating func insert(_ stream: Stream, for id: HTTP2StreamID) {
        assert(Int32(id) > 0 && !contains(id), "stream \(id) inserted twice")
        let index = slotIndex(id)
        if slotIDs[index] != 0 {
            overflow[HTTP2StreamID(slotIDs[index])] = slots[index].take()
            if overflow.count > slots.count / 4, slots.count < Self.maximumRingSize {
                slotIDs[index] = Int32(id)
                slots[index] = stream
                storedCount += 1
                grow()
                return
            }
        }
        slotIDs[index] = Int32(id)
        slots[index] = stream
        storedCount += 1
    }

    @inlinable @discardableResult
    public mutating func remove(_ id: HTTP2StreamID) -> Stream? {
        let index = slotIndex(id)
        if slotIDs[index] == Int32(id) {
            storedCount -= 1
            slotIDs[index] = 0
            return slots[index].take()
        }
        guard !overflow.isEmpty, let stream = overflow.removeValue(forKey: id) else { return nil }
        storedCount -= 1
        return stream
    }

    /// Changes the stream in place; nil when there is no such stream.
    @inlinable @inline(__always) @discardableResult
    public mutating func update<Result>(
        _ id: HTTP2StreamID,
        _ body: (inout Stream) throws -> Result
    ) rethrows -> Result? {
        let index = slotIndex(id)
        if slotIDs[index] == Int32(id) { return try body(&slots[index]!) }
        guard !overflow.isEmpty, let position = overflow.index(forKey: id) else { return nil }
        return try body(&overflow.values[position])
    }

    /// Reads the stream without copying it out; nil when there is no such stream.
    @inlinable @inline(__always)
    public func read<Result>(_ id: HTTP2StreamID, _ body: (borrowing Stream) throws -> Result) rethrows -> Result? {
        let index = slotIndex(id)
        if slotIDs[index] == Int32(id) { return try body(slots[index]!) }
        guard !overflow.isEmpty, let position = overflow.index(forKey: id) else { return nil }
        return try body(overflow.values[position])
    }

    /// Every stream, in no particular order.
    @inlinable
    public mutating func updateAll(_ body: (HTTP2StreamID, inout Stream) throws -> Void) rethrows {
        for index in slots.indices where slotIDs[index] != 0 {
            try body(HTTP2StreamID(slotIDs[index]), &slots[index]!)
        }
        for position in overflow.indices {
            try body(overflow.keys[position], &overflow.values[position])
        }
    }

    /// The ids of the streams for which `predicate` holds, in increasing order.
    @inlinable
    public func ids(where predicate: (borrowing Stream) throws -> Bool) rethrows -> [HTTP2StreamID] {
        var result: [HTTP2StreamID] = []
        for index in slots.indices where slotIDs[index] != 0 {
            if try predicate(slots[index]!) { result.append(HTTP2StreamID(slotIDs[index])) }
        }
        for (id, stream) in overflow where try predicate(stream) { result.append(id) }
        return result.sorted()
    }

    /// Empties the table and returns what it held, by increasing stream id.
    @inlinable
    public mutating func removeAll() -> [(id: HTTP2StreamID, stream: Stream)] {
        var result: [(id: HTTP2StreamID, stream: Stream)] = []
        result.reserveCapacity(count)
        for index in slots.indices where slotIDs[index] != 0 {
            result.append((HTTP2StreamID(slotIDs[index]), slots[index].take()!))
            slotIDs[index] = 0
        }
        for (id, stream) in overflow { result.append((id, stream)) }
        overflow.removeAll()
        storedCount = 0
        result.sort { $0.id < $1.id }
        return result
    }

    /// Doubles the ring and moves overflowed streams back into it where their slot is free; of two
    /// streams that share a slot, the newer one takes it (the older one is the likelier straggler).
    @inlinable mutating func grow() {
        let old = removeAll()
        slotIDs = Array(repeating: 0, count: slots.count * 2)
        slots = Array(repeating: nil, count: slots.count * 2)
        for (id, stream) in old {
            let index = slotIndex(id)
            if slotIDs[index] != 0 { overflow[HTTP2StreamID(slotIDs[index])] = slots[index].take() }
            slotIDs[index] = Int32(id)
            slots[index] = stream
        }
        storedCount = old.count
    }
}

extension InFlightStreams: Sendable where Stream: Sendable {}
