import ArgumentParser
import Testing

@testable import pushgate_bench

/// `pushgate-bench micro`: which cases its options select, what they refuse, and that every case's
/// check passes against the code it runs (so a case cannot silently time nothing).
@Suite struct MicroCommandTests {
    private func selected(_ arguments: [String]) throws -> [String] {
        try MicroCommand.parse(arguments).selectedCases().map(\.name)
    }

    @Test func withoutOptionsEveryCaseRunsForTwoSeconds() throws {
        let command = try MicroCommand.parse([])
        #expect(command.seconds == 2)
        #expect(!command.list)
        #expect(try command.selectedCases().map(\.name) == MicroCase.all.map(\.name))
    }

    @Test func theCasesCoverTheHTTP2PathIngressFCMTheLegacyCodecAndWebPush() {
        let names = Set(MicroCase.all.map(\.name))
        let expected: Set = [
            "apns-exchange", "apns-headers", "h2-answers", "udp-notification", "json-payload", "fcm-message",
            "fcm-body", "jwt-sign", "legacy-encode", "legacy-decode", "webpush-encrypt", "webpush-keygen",
            "webpush-fipskey", "webpush-ecdh", "webpush-readback", "webpush-vapid",
        ]
        #expect(names == expected)
        #expect(names.count == MicroCase.all.count, "case names are unique")
    }

    @Test func casesRunInTheOrderGivenOnceEach() throws {
        #expect(
            try selected(["--cases", "legacy-decode, apns-headers,legacy-decode"]) == ["legacy-decode", "apns-headers"]
        )
        let command = try MicroCommand.parse(["--seconds", "0.5", "--cases", "jwt-sign", "--list"])
        #expect(command.seconds == 0.5)
        #expect(command.list)
    }

    @Test(arguments: [
        (["--cases", "apns"], "no case named 'apns'"),
        (["--cases", "apns-exchange,,jwt-sign"], "comma-separated"),
        (["--cases", ""], "comma-separated"),
        (["--seconds", "0"], "--seconds must be between"),
        (["--seconds", "601"], "--seconds must be between"),
        (["--seconds", "nan"], "--seconds must be between"),
    ])
    func refusedOptionsSayWhy(arguments: [String], message: String) {
        do {
            _ = try MicroCommand.parse(arguments)
            Issue.record("\(arguments) was accepted")
        } catch {
            #expect(MicroCommand.message(for: error).contains(message), "\(MicroCommand.message(for: error))")
        }
    }

    @Test func aNonNumericDurationIsRefused() {
        #expect(throws: (any Error).self) { try MicroCommand.parse(["--seconds", "two"]) }
    }

    /// Builds every case, which runs its check (frames decoded, outcomes counted, fields compared), then
    /// times it for a moment: each round does work and the measurement counts it.
    @Test(arguments: MicroCase.all.map(\.name))
    func everyCasePassesItsCheckAndCountsItsOperations(name: String) throws {
        let benchmark = try #require(MicroCase.all.first { $0.name == name })
        let workload = try benchmark.prepare()
        let first = try workload.round()
        #expect(first > 0)
        let result = try MicroMeasurement.measure(workload, seconds: 0.001)
        #expect(result.operations >= first && result.operations % first == 0)
        #expect(result.wallSeconds > 0 && result.cpuSeconds >= 0)
    }

    @Test func figuresArePerOperation() {
        let result = MicroResult(operations: 4_000, wallSeconds: 2, cpuSeconds: 1)
        #expect(result.operationsPerSecond == 2_000)
        #expect(result.cpuNanosecondsPerOperation == 250_000)
        #expect(result.cpuShareOfWall == 0.5)
        #expect(MicroReport.nanoseconds(812) == "812 ns")
        #expect(MicroReport.nanoseconds(4_310) == "4.31 µs")
        #expect(MicroReport.nanoseconds(1_200_000) == "1.20 ms")
    }
}
