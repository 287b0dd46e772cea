import Foundation
import PushgateCore
import Testing

@Suite("Store failures: transient or permanent, and one log line per storm")
struct StoreFailureTests {
    struct ConnectionLost: Error {}

    @Test("broken rules are permanent; the backend and anything else are transient")
    func classification() {
        let permanent: [StoreError] = [
            .unknownGroup(app: "a", group: "g"), .noTargets(), .duplicateRequestID(try! RequestID("r")),
            .invalidArgument("limit"),
        ]
        for error in permanent { #expect(StoreFailureKind(classifying: error) == .permanent, "\(error)") }
        #expect(StoreFailureKind(classifying: StoreError.backend("disk full")) == .transient)
        #expect(StoreFailureKind(classifying: StoreError(code: .init("added_later"), message: "")) == .transient)
        #expect(StoreFailureKind(classifying: ConnectionLost()) == .transient)
    }

    @Test("a storm is one line per second per kind, each with the count since the last line")
    func storm() {
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        var storm = FailureStorm<String>(interval: 1)
        #expect(storm.record("disk", now: start) == .log(count: 1))
        for tick in 1...999 {
            #expect(storm.record("disk", now: start + Double(tick) / 1000) == .suppress)
        }
        #expect(storm.record("other", now: start + 0.5) == .log(count: 1), "kinds are counted apart")
        #expect(storm.record("disk", now: start + 1) == .log(count: 1000))
        #expect(storm.record("disk", now: start + 1.5) == .suppress)
        #expect(storm.record("disk", now: start + 60) == .log(count: 2), "a quiet spell ends the storm")
        #expect(storm.record("disk", now: start + 61) == .log(count: 1))
    }
}
