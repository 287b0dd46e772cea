import Foundation
import PushgateCore
import Testing

@Suite("Request ids")
struct RequestIDTests {
    struct CountingGenerator: RandomNumberGenerator {
        var state: UInt64 = 0
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            return state
        }
    }

    @Test func generatedIdsSortByCreationTimeAndAreValid() throws {
        var generator = CountingGenerator()
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let ids = (0..<100).map {
            RequestID.generate(at: start.addingTimeInterval(Double($0) / 100), using: &generator)
        }
        #expect(ids == ids.sorted())
        #expect(Set(ids).count == ids.count)
        for id in ids {
            #expect(id.value.count == 28)
            #expect(try RequestID(id.value) == id)
        }
        #expect(ids[0].value.hasPrefix("0" + String(1_800_000_000_000, radix: 16)))  // 12 digits
    }

    struct FixedGenerator: RandomNumberGenerator {
        var value: UInt64
        mutating func next() -> UInt64 { value }
    }

    @Test("an id is the time's 12 hex digits, then the random number's 16, lower case and zero-padded")
    func generatedIdDigits() {
        var generator = FixedGenerator(value: 0x0123_4567_89ab_cdef)
        let id = RequestID.generate(at: Date(timeIntervalSince1970: 1_800_000_000.5), using: &generator)
        #expect(id.value == "01a3185c51f4" + "0123456789abcdef")
        generator.value = .max
        let epoch = RequestID.generate(at: Date(timeIntervalSince1970: 0), using: &generator)
        #expect(epoch.value == "000000000000" + "ffffffffffffffff")
    }

    @Test("ids from the pooled system generator: unique across its refills, from several threads at once")
    func pooledIdsAreUnique() async {
        let at = Date()
        let ids = await withTaskGroup(of: [RequestID].self) { group in
            for _ in 0..<4 { group.addTask { (0..<1_500).map { _ in RequestID.generate(at: at) } } }
            return await group.reduce(into: [RequestID]()) { $0 += $1 }
        }
        #expect(Set(ids).count == 6_000, "4 x 1,500 ids at one millisecond, across several pools of 512")
        var generator = PooledSystemRandomNumberGenerator()
        let values = (0..<2_000).map { _ in generator.next() }
        #expect(Set(values).count == 2_000)
        // Random bits, not a counter or zeros: about half of all bits set.
        let ones = values.reduce(0) { $0 + $1.nonzeroBitCount }
        #expect(ones > 60_000 && ones < 68_000)
    }

    @Test(arguments: ["", String(repeating: "a", count: 65), "has space", "slash/", "ünïcode"])
    func malformedIdsAreRejected(_ raw: String) {
        #expect(throws: ValidationError(code: .invalidRequestID, field: "id", message: "")) { try RequestID(raw) }
    }

    @Test func callerChosenIdsAreAccepted() throws {
        #expect(try RequestID("order-42.retry_1").value == "order-42.retry_1")
    }
}
