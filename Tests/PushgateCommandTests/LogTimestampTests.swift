import Foundation
import Testing

@testable import pushgate

@Suite("Log line times: ISO 8601 in UTC, written digit by digit")
struct LogTimestampTests {
    /// Times across leap years, month and year ends, and the start of the epoch; each 0.4 ms past its
    /// millisecond, as a time read from the clock is (Foundation truncates a time just below a whole
    /// millisecond, such as 1.123 stored as 1.12299…, to the one before).
    static let dates: [Date] = [
        0, 59.999, 86_399.5, 951_782_400, 951_868_799.001, 1_709_164_800, 1_735_689_599.999, 1_800_000_000.123,
        4_102_444_800, 253_402_300_799,
    ].map { Date(timeIntervalSince1970: $0 + 0.000_4) }

    @Test("the same text as Foundation's ISO 8601 style, with and without milliseconds")
    func sameAsFoundation() {
        var generator = SystemRandomNumberGenerator()
        let random = (0..<2_000).map { _ in
            Date(
                timeIntervalSince1970: Double(Int64.random(in: 0...4_102_444_800_000, using: &generator)) / 1000
                    + 0.000_4
            )
        }
        for date in Self.dates + random {
            #expect(LogTimestamp.string(date, milliseconds: false) == date.formatted(.iso8601))
            #expect(
                LogTimestamp.string(date, milliseconds: true)
                    == date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
            )
        }
    }

    @Test("a text line starts with the time of its writing")
    func textLineTime() throws {
        let before = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let line = LogOutput.textLine("pushgate", LogOutputTests.event("ready"), [:])
        let time = try #require(line.split(separator: " ").first)
        let parsed = try Date(String(time), strategy: .iso8601)
        #expect(parsed >= before && parsed <= Date())
    }
}
