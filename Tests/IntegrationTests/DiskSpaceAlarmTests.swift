import Testing

@testable import PushgateGateway

@Suite("The disk-space alarm's lines")
struct DiskSpaceAlarmTests {
    @Test("one warning when free space falls below the minimum, one line when it is back, nothing in between")
    func transitions() {
        var alarm = DiskSpaceAlarm()
        let readings = [false, true, true, true, false, false, true]
        #expect(readings.map { alarm.measured(isLow: $0) } == [.none, .warn, .none, .none, .clear, .none, .warn])
    }
}
