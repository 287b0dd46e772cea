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

    @Test(arguments: ["", String(repeating: "a", count: 65), "has space", "slash/", "ünïcode"])
    func malformedIdsAreRejected(_ raw: String) {
        #expect(throws: ValidationError(code: .invalidRequestID, field: "id", message: "")) { try RequestID(raw) }
    }

    @Test func callerChosenIdsAreAccepted() throws {
        #expect(try RequestID("order-42.retry_1").value == "order-42.retry_1")
    }
}
