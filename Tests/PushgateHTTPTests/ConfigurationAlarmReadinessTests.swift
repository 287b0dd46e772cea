import Foundation
import PushgateHTTP
import Synchronization
import Testing

@Suite("HTTP API: readiness and configuration alarms")
struct ConfigurationAlarmReadinessTests {
    @Test("/readyz is 503 configuration_alarm naming the app and the likely cause while an alarm is in force")
    func readyzNamesTheAlarm() async throws {
        let alarms = Mutex<[String]>(["app news (apns): sandbox token sent to production (or the reverse)?"])
        let monitoring = HTTPAPI.Monitoring(configurationAlarms: { alarms.withLock { $0 } })
        try await withRouterClient(monitoring: monitoring) { client, _ in
            let down = try await client.send(.get, "/readyz")
            #expect(down.status == .serviceUnavailable)
            #expect(down.error.code == "configuration_alarm")
            let message = (down.json["error"] as? [String: Any])?["message"] as? String
            #expect(message == "app news (apns): sandbox token sent to production (or the reverse)?")
            alarms.withLock { $0 = [] }
            #expect(try await client.send(.get, "/readyz").status == .ok)
        }
    }
}
