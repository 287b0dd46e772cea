import ArgumentParser
import Testing

@testable import pushgate_bench

/// The pure parts of `transactional` and `hol`: the open-loop schedule, the sequence number in a
/// payload and in the stand-in's receipt line, the tally that matches them, and the percentiles.
@Suite struct MixedTrafficTests {
    // MARK: Pacing

    @Test func requestIIsDueIOverRateSecondsAfterTheStart() {
        let schedule = PacingSchedule(rate: 4, total: 10)
        #expect(schedule.offset(of: 0) == 0)
        #expect(schedule.offset(of: 1) == 0.25)
        #expect(schedule.offset(of: 8) == 2)
        #expect(schedule.due(from: 0, elapsed: 0) == 0..<1)
        #expect(schedule.due(from: 1, elapsed: 0.2) == 1..<1, "request 1 is not due before 0.25 s")
        #expect(schedule.due(from: 1, elapsed: 0.5) == 1..<3)
    }

    @Test func aLateSenderGetsEverythingOverdueAtOnceAndNothingBeyondTheTotal() {
        let schedule = PacingSchedule(rate: 100, total: 50)
        #expect(schedule.due(from: 3, elapsed: 0.2) == 3..<21)
        #expect(schedule.due(from: 21, elapsed: 60) == 21..<50)
        #expect(schedule.due(from: 50, elapsed: 60).isEmpty)
        #expect(schedule.due(from: 0, elapsed: -1).isEmpty)
    }

    @Test func eachRequestIsDueExactlyAtItsOwnOffsetWhateverTheRate() {
        for rate: Double in [3, 7, 250, 2_000, 10_000, 1_000.0 / 100] {
            let schedule = PacingSchedule(rate: rate, total: 5_000)
            for index in stride(from: 0, to: 5_000, by: 37) {
                let due = schedule.due(from: 0, elapsed: schedule.offset(of: index))
                #expect(due.upperBound == index + 1, "rate \(rate), request \(index)")
            }
        }
    }

    @Test func latenessCountsOnlyWhatWentLateAndNeverBelowZero() {
        var lateness = SendLateness()
        for value in [-0.000_1, 0, 0.000_5, 0.002, 0.2] { lateness.record(value) }
        #expect(lateness.values.min() == 0)
        #expect(lateness.late(beyond: 0.001) == 2)
        #expect(lateness.late(beyond: 0.1) == 1)
    }

    // MARK: Sequence numbers

    @Test func theSequenceNumberIsReadFromAPayloadWhereverItIs() {
        #expect(BenchSequence.number(in: Array(#"{"aps":{"alert":"x"},"bench_seq":4711}"#.utf8)) == 4711)
        #expect(BenchSequence.number(in: Array(#"{"bench_seq":0,"aps":{}}"#.utf8)) == 0)
        #expect(BenchSequence.number(in: Array(#"{"bench_seq":"7"}"#.utf8)) == nil, "a string is no number")
        #expect(BenchSequence.number(in: Array(#"{"aps":{"alert":"bench_seq"}}"#.utf8)) == nil)
        #expect(BenchSequence.number(in: Array("".utf8)) == nil)
    }

    @Test func aReceiptLineGivesTheStandInsClockAndTheSequenceNumber() throws {
        let line = Array("1795810437673434 {\"aps\":{\"alert\":\"x\"},\"bench_seq\":42}\n".utf8)
        let receipt = try #require(BenchSequence.receipt(in: line))
        #expect(receipt.receivedMicros == 1_795_810_437_673_434)
        #expect(receipt.sequence == 42)
        #expect(BenchSequence.receipt(in: Array("- {\"bench_seq\":42}".utf8)) == nil, "no clock: no receipt")
        #expect(BenchSequence.receipt(in: Array("1795810437673434 {\"aps\":{}}".utf8)) == nil)
        #expect(BenchSequence.receipt(in: Array("1795810437673434".utf8)) == nil)
    }

    @Test func theBenchmarksRequestsCarryTheirSequenceNumberAndTheirOwnGroup() {
        let transactional = TransactionalBenchmark.body(index: 2_507, devices: 2_500)
        #expect(BenchSequence.number(in: transactional) == 2_507)
        #expect(String(decoding: transactional, as: UTF8.self).hasPrefix(#"{"groups":["t7"],"type":"urgent""#))
        let single = HeadOfLineBenchmark.single(index: 1_003, devices: 1_000)
        #expect(BenchSequence.number(in: single) == 1_003)
        #expect(String(decoding: single, as: UTF8.self).hasPrefix(#"{"groups":["s3"]"#))
        #expect(BenchSequence.number(in: TransactionalBenchmark.warmupBody(index: 1, devices: 10)) == nil)
        #expect(
            BenchSequence.number(in: Array(HeadOfLineBenchmark.broadcast.utf8)) == nil,
            "the stand-in logs no broadcast"
        )
    }

    // MARK: The tally

    @Test func receiptsAreMatchedToSendsBySequenceNumber() throws {
        var tally = TrafficTally(capacity: 4)
        tally.sent(0, atMicros: 1_000)
        tally.sent(1, atMicros: 2_000)
        tally.sent(2, atMicros: 3_000)
        tally.received(1, atMicros: 2_500)
        tally.received(0, atMicros: 9_000)
        #expect(tally.sent == 3)
        #expect(tally.answered == 2)
        #expect(!tally.allAnswered)
        #expect(tally.latencies == [0.008, 0.000_5])
        tally.received(2, atMicros: 4_000)
        #expect(tally.allAnswered)
        // The last receipt (9,000) after the last send (3,000), not the last request's own latency.
        #expect(try #require(tally.lagOfLastAnswer) == 0.006)
    }

    @Test func duplicateAndUnknownReceiptsAreCountedApartAndChangeNoLatency() {
        var tally = TrafficTally(capacity: 2)
        tally.sent(0, atMicros: 100)
        tally.received(0, atMicros: 300)
        tally.received(0, atMicros: 900)
        tally.received(1, atMicros: 900)
        tally.received(7, atMicros: 900)
        tally.sent(0, atMicros: 5_000)
        #expect(tally.duplicates == 1)
        #expect(tally.unknown == 2, "a request never sent, and one beyond the run")
        #expect(tally.sent == 1, "a sequence number is sent once")
        #expect(tally.latencies == [0.000_2])
    }

    @Test func anEmptyTallyHasNoLag() {
        #expect(TrafficTally(capacity: 3).lagOfLastAnswer == nil)
        #expect(TrafficTally(capacity: 3).allAnswered)
    }

    // MARK: Percentiles

    @Test func percentilesAreNearestRank() {
        let values = Percentiles((1...100).map(Double.init).reversed())
        #expect(values.value(0.5) == 50)
        #expect(values.value(0.99) == 99)
        #expect(values.maximum == 100)
        #expect(values.mean == 50.5)
        let one = Percentiles([7])
        #expect(one.value(0.5) == 7 && one.value(0.99) == 7)
        #expect(Percentiles([]).value(0.5).isNaN)
        #expect(Percentiles([]).summary == "no samples")
    }

    // MARK: Options

    @Test func transactionalRefusesWhatItCannotMeasure() throws {
        #expect(throws: (any Error).self) { try TransactionalCommand.parse(["--rate", "0"]) }
        #expect(throws: (any Error).self) { try TransactionalCommand.parse(["--clients", "8"]) }
        #expect(throws: (any Error).self) { try TransactionalCommand.parse(["--apns-host", "127.0.0.1:2197"]) }
        #expect(throws: (any Error).self) { try TransactionalCommand.parse(["--rate", "1", "--seconds", "0.5"]) }
        let command = try TransactionalCommand.parse(["--rate", "2000", "--seconds", "10", "--http", "--clients", "8"])
        #expect(command.total == 20_000)
        #expect(command.devices == 2_500)
    }

    @Test func holDefaultsToTheIssuesShape() throws {
        let command = try HeadOfLineCommand.parse([])
        #expect(command.devices == 1_000_000)
        #expect(command.singlesAfterMilliseconds == 1_000)
        #expect(command.singlesEveryMilliseconds == 100)
        #expect(command.gateway.rttMilliseconds == nil)
        #expect(HeadOfLineCommand.defaultRTTMilliseconds == 50)
        #expect(throws: (any Error).self) { try HeadOfLineCommand.parse(["--singles-every-ms", "0"]) }
    }
}
