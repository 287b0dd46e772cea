import PushgateCore
import Testing

@Suite("APNs error body")
struct APNsErrorBodyTests {
    @Test("reason and 410 timestamp are read; anything else reads as neither")
    func parsesReasonAndTimestamp() {
        let gone = APNsErrorBody(parsing: Array(#"{"reason":"Unregistered","timestamp":1700000000123}"#.utf8))
        #expect(gone == APNsErrorBody(reason: .unregistered, timestamp: 1_700_000_000_123))
        #expect(APNsErrorBody(parsing: Array(#"{"reason":"BadDeviceToken"}"#.utf8)).reason == .badDeviceToken)
        #expect(APNsErrorBody(parsing: Array("not json".utf8)) == APNsErrorBody())
        #expect(APNsErrorBody(parsing: Array("[1]".utf8)) == APNsErrorBody())
    }
}
