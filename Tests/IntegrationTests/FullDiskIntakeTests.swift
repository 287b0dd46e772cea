import Foundation
import Logging
import PushgateCore
import PushgateSQLite
import PushgateUDP
import Synchronization
import Testing

/// The two defects seen on a full disk (issue 13's introduction), against a real SQLite store whose
/// writes fail as on a full disk (``FaultInjectingStore/setDiskFull(_:)``), behind the real UDP ingress.
@Suite("UDP intake on a full disk")
struct FullDiskIntakeTests {
    /// The gateway's intake without the dispatcher: it stores the request.
    struct StoreIntake: NotificationIntake {
        let store: any PushStore
        func submit(_ request: NotificationRequest) async throws -> EnqueueResult { try await store.enqueue(request) }
    }

    static func token(_ index: Int) -> String { String(format: "%064x", 0x0d15_0000 + index) }

    @Test(
        "full disk: registrations wait for room and write a few lines, not one each; a notification is retried until stored"
    )
    func fullDisk() async throws {
        let directory = try TemporaryDirectory()
        let sqlite = try SQLiteStore(path: directory.path("full.db"))
        let first = try DeviceToken(hex: Self.token(0))
        _ = try await sqlite.register(Registration(app: "default", token: first, group: "g", at: Date()))
        let store = FaultInjectingStore(base: sqlite)
        let warnings = CapturedLog.warnings()
        var configuration = UDPIngress.Configuration(host: "127.0.0.1", registrationPort: 0, notificationPort: 0)
        configuration.storeRetryBackoff = Backoff(base: .milliseconds(5), cap: .milliseconds(50))
        let ingress = UDPIngress(
            configuration: configuration,
            registry: store,
            intake: StoreIntake(store: store),
            // The ingress's clock stands still: every failure falls in the same second of its storm limiter.
            clock: ManualWallClock(Date(timeIntervalSince1970: 1_800_000_000)),
            logger: warnings.logger("pushgate.udp")
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await ingress.run() }
            let bound = try await ingress.boundAddresses()
            store.setDiskFull(true)

            let registrations = try UDPSender(port: bound.registrationPort)
            let waiting = 500
            for index in 1...waiting { registrations.send(#"{"device": "\#(Self.token(index))", "group": "g"}"#) }
            try await eventually("every registration read") {
                ingress.statistics.registration.received == waiting
            }
            // The store is out: nothing is refused; they wait for room.
            #expect(ingress.statistics.registration.rejectedTotal == 0)
            // One line per second and kind: the batch failure and the outage.
            #expect(warnings.lines.count <= 3, "\(waiting) waiting registrations")

            let before = store.intakeFailures
            try UDPSender(port: bound.notificationPort).send(#"{"groups": ["g"], "payload": {"aps": {}}}"#)
            try await eventually("the notification is retried while the disk is full") {
                store.intakeFailures >= before + 3
            }
            #expect(ingress.statistics.notification.rejectedTotal == 0, "not dropped after one attempt")
            store.setDiskFull(false)
            try await eventually("stored once the disk has room") { ingress.statistics.notification.applied == 1 }
            #expect(ingress.statistics.notification.rejectedTotal == 0)
            try await eventually("every registration applied once the disk has room") {
                ingress.statistics.registration.applied == waiting
            }
            #expect(ingress.statistics.registration.rejectedTotal == 0)
            group.cancelAll()
        }
    }

}
