import NIOHTTP2
import Testing

@testable import APNsHTTP2
@testable import PushTransport

/// The table must behave exactly like a dictionary keyed by stream id, whatever order streams are
/// answered in; a plain `Dictionary` is the model.
@Suite("In-flight streams table")
struct InFlightStreamsTests {
    /// A deterministic generator (SplitMix64), so a failure replays.
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9e37_79b9_7f4a_7c15
            var z = state
            z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
            z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
            return z ^ (z >> 31)
        }
    }

    func expectSame(
        _ table: InFlightStreams<Int>,
        _ model: [HTTP2StreamID: Int],
        probing ids: some Sequence<HTTP2StreamID>
    ) {
        #expect(table.count == model.count)
        #expect(table.isEmpty == model.isEmpty)
        for id in ids {
            #expect(table.contains(id) == (model[id] != nil), "stream \(id)")
            #expect(table.read(id, { $0 }) == model[id], "stream \(id)")
        }
        #expect(table.ids(where: { _ in true }) == model.keys.sorted())
    }

    @Test("random opens and answers (with stragglers far behind the newest stream) match a dictionary")
    func matchesDictionary() {
        var random = SeededGenerator(state: 7)
        var table = InFlightStreams<Int>(ringSize: 8)
        var model: [HTTP2StreamID: Int] = [:]
        var nextID: Int32 = 1
        for step in 0..<20_000 {
            let open = model.count
            // Mostly keep 0-40 streams open; now and then leave one open for a long time.
            if open < 40, random.next() % 3 != 0 {
                let id = HTTP2StreamID(nextID)
                nextID += 2
                table.insert(step, for: id)
                model[id] = step
            } else if !model.isEmpty {
                let keys = model.keys.sorted()
                // The oldest stream is rarely the one answered, so some straggle far behind.
                let pick =
                    keys.count == 1 || random.next() % 50 == 0
                    ? keys[0] : keys[1 + Int(random.next() % UInt64(keys.count - 1))]
                if random.next() % 4 == 0 {
                    table.update(pick) { $0 += 1 }
                    model[pick]! += 1
                } else {
                    #expect(table.remove(pick) == model.removeValue(forKey: pick))
                }
            }
            if step % 997 == 0 {
                expectSame(
                    table,
                    model,
                    probing: stride(from: max(1, nextID - 200), to: nextID + 4, by: 1).map { HTTP2StreamID($0) }
                )
            }
        }
        expectSame(table, model, probing: stride(from: 1, to: nextID + 4, by: 1).map { HTTP2StreamID($0) })
        #expect(table.ringSize >= 64, "the ring grew towards the number of open streams")
    }

    @Test("a stream still open when its slot comes round again stays findable, and the newer one takes the slot")
    func straggler() {
        var table = InFlightStreams<String>(ringSize: 4)
        table.insert("slow", for: 1)
        for id in stride(from: 3, through: 9, by: 2) {
            table.insert("fast \(id)", for: HTTP2StreamID(Int32(id)))
            if id != 9 { #expect(table.remove(HTTP2StreamID(Int32(id))) == "fast \(id)") }
        }
        // Stream 9 shares stream 1's slot.
        #expect(table.overflowCount == 1)
        #expect(table.read(1, { $0 }) == "slow")
        #expect(table.read(9, { $0 }) == "fast 9")
        table.update(1) { $0 += " answered" }
        #expect(table.remove(1) == "slow answered")
        #expect(table.remove(1) == nil)
        #expect(table.count == 1)
        let all = table.removeAll()
        #expect(all.map(\.id) == [9])
        #expect(table.isEmpty)
    }

    @Test("updateAll reaches every stream, in the ring and in the overflow")
    func updateAll() {
        var table = InFlightStreams<Int>(ringSize: 2)
        for id in stride(from: 1, through: 11, by: 2) { table.insert(0, for: HTTP2StreamID(Int32(id))) }
        table.updateAll { _, value in value += 5 }
        #expect(table.removeAll().map(\.stream) == Array(repeating: 5, count: 6))
    }
}
