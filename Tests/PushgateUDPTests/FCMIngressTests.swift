import Foundation
import PushgateCore
import PushgateUDP
import Testing

extension UDPIngressTests {
    /// A bad FCM token, an unknown platform and an FCM message too large are counted and change nothing.
    @Test("over real sockets: an FCM device registers and is removed; FCM's refusals are counted")
    func fcmOverSockets() async throws {
        let registry = FakeRegistry()
        let intake = FakeIntake(knownGroups: ["Choom"])
        try await withIngress(registry: registry, intake: intake) { running in
            try running.register(#"{"device": "\#(fcmToken)", "group": "Choom", "platform": "fcm"}"#)
            try running.register(#"{"device": "tooShortForFCM", "group": "Choom", "platform": "fcm"}"#)
            try running.register(#"{"device": "\#(fcmToken)", "group": "Choom", "platform": "hms"}"#)
            try running.register(#"{"device": "\#(fcmToken)", "group": "Choom"}"#)  // not an APNs token
            try running.notify(
                #"{"groups": ["Choom"], "payload": {"aps": {"alert": "hi"}}, "fcm": {"data": {"k": "v"}}}"#
            )
            let big = String(repeating: "x", count: FCMMessage.maximumBytes)
            try running.notify(#"{"groups": ["Choom"], "payload": {}, "fcm": {"data": {"big": "\#(big)"}}}"#)
            #expect(
                await running.observer.wait {
                    $0.registration.applied == 1 && $0.registration.rejectedTotal == 3
                        && $0.notification.applied == 1 && $0.notification.rejectedTotal == 1
                }
            )
            let fcmDevice = try DeviceToken(fcm: fcmToken)
            #expect(registry.memberships == [.init(app: "default", token: fcmDevice, group: "Choom")])
            #expect(registry.memberships.allSatisfy { $0.token.platform == .fcm })
            let statistics = running.ingress.statistics
            #expect(statistics.registration.rejected == ["invalid_token": 2, "invalid_platform": 1])
            #expect(statistics.notification.rejected == ["payload_too_large": 1])
            #expect(intake.requests.count == 1, "the oversized request reached nothing")
            let stored = try #require(intake.requests.first)
            #expect(stored.fcm == (try FCMOverride(jsonBytes: Array(#"{"data": {"k": "v"}}"#.utf8))))

            try running.register(#"{"device": "\#(fcmToken)", "group": "Choom", "platform": "fcm", "remove": true}"#)
            #expect(await running.observer.wait { $0.registration.applied == 2 })
            #expect(registry.memberships.isEmpty)
        }
    }
}
