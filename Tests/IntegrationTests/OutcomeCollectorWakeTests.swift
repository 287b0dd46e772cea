import PushTransport
import PushgateCore
import Testing

@testable import PushgateDispatch

/// The collector wakes the dispatcher once per batch of answers: a thread hand-off per answer, and a
/// send of one request per wake, cost more than the rest of a broadcast's dispatch.
@Suite("Outcome collector: the dispatcher is woken once per batch of answers")
struct OutcomeCollectorWakeTests {
    let collector = OutcomeCollector()
    let tokens: [DeviceToken]

    init() throws {
        tokens = try (0..<1_000).map { index in try DeviceToken(hex: String(format: "%064x", index + 1)) }
    }

    func answer(_ range: Range<Int>) {
        for index in range {
            let accepted = APNsOutcome.answered(
                status: 200,
                reason: nil,
                apnsID: nil,
                apnsUniqueID: nil,
                invalidatedAtMilliseconds: nil
            )
            collector.receive(PushOutcome(apns: accepted), token: tokens[index], tag: UInt64(index))
        }
    }

    @Test("800 in flight: the 100th answer wakes the dispatcher (an eighth), the 99 before it do not")
    func wakesAtAnEighth() {
        collector.willSend(800)
        answer(0..<99)
        #expect(collector.wakes == 0)
        answer(99..<100)
        #expect(collector.wakes == 1)
        answer(100..<180)
        #expect(collector.wakes == 1, "woken once until the dispatcher drains")
        #expect(collector.drain().count == 180)
        answer(180..<256)
        #expect(collector.wakes == 1, "620 left in flight: the next wake is at 77 answers, not before")
        answer(256..<257)
        #expect(collector.wakes == 2)
        #expect(collector.drain().count == 77)
    }

    @Test("a batch is at most 128 answers, however much is in flight")
    func batchIsBounded() {
        collector.willSend(2_000)
        answer(0..<(OutcomeCollector.maximumWakeBatch - 1))
        #expect(collector.wakes == 0)
        answer((OutcomeCollector.maximumWakeBatch - 1)..<OutcomeCollector.maximumWakeBatch)
        #expect(collector.wakes == 1)
    }

    @Test("a few in flight: the first answer wakes the dispatcher, and the first after each drain")
    func fewInFlight() {
        collector.willSend(3)
        answer(0..<1)
        #expect(collector.wakes == 1)
        answer(1..<2)
        #expect(collector.wakes == 1, "not drained yet: the dispatcher takes both when it runs")
        #expect(collector.drain().count == 2)
        answer(2..<3)
        #expect(collector.wakes == 2)
        #expect(collector.inFlight == 0)
    }
}
