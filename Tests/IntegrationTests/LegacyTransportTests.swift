import APNsHTTP2
import APNsLegacy
import APNsSimulator
import APNsTransport
import Foundation
import Logging
import PushTransport
import PushgateCore
import PushgateDispatch
import PushgateSQLite
import Synchronization
import Testing

/// Collects outcomes by tag; lets a test wait for a number of them.
final class LegacyOutcomes: APNsOutcomeReceiver {
    private let outcomes = Mutex<[UInt64: [APNsOutcome]]>([:])

    func receive(_ outcome: APNsOutcome, for request: APNsRequest) {
        outcomes.withLock { $0[request.tag, default: []].append(outcome) }
    }

    var all: [UInt64: [APNsOutcome]] { outcomes.withLock { $0 } }
    var count: Int { outcomes.withLock { $0.values.reduce(0) { $0 + $1.count } } }
}

/// The legacy transport against the simulator's legacy ports: real TLS with client certificates, on loopback.
struct LegacyFixture {
    static let topic = "com.example.pushgate"

    static func token(_ number: Int) -> DeviceToken {
        try! DeviceToken(hex: String(format: "%064x", 0x1e6ac1_0000 + number))
    }

    struct Context: Sendable {
        var simulator: RunningAPNsSimulator
        var certificate: APNsClient.ClientCertificate
        var trustRoots: APNsClient.TrustRoots

        func senderConfiguration(
            _ tweak: (inout LegacySender.Configuration) -> Void = { _ in }
        ) -> LegacySender.Configuration {
            var configuration = LegacySender.Configuration(
                gateway: .init(host: "127.0.0.1", port: simulator.legacyPort!),
                certificate: certificate,
                trustRoots: trustRoots
            )
            configuration.shutdownGracePeriod = .seconds(1)
            tweak(&configuration)
            return configuration
        }

        func withSender<Result: Sendable>(
            _ tweak: (inout LegacySender.Configuration) -> Void = { _ in },
            _ body: (LegacySender) async throws -> Result
        ) async throws -> Result {
            try await LegacySender.withClient(
                configuration: senderConfiguration(tweak),
                logger: TestLogger.make("legacy"),
                body
            )
        }
    }

    static func with<Result: Sendable>(_ body: (Context) async throws -> Result) async throws -> Result {
        let directory = try TemporaryDirectory()
        let authority = try SimulatorCertificateAuthority()
        var configuration = APNsSimulator.Configuration()
        configuration.tls = .authority(authority)
        configuration.clientCertificateAuthorityPEM = authority.certificatePEM
        configuration.legacyPort = 0
        configuration.feedbackPort = 0
        configuration.recordLimit = 0
        configuration.logger = TestLogger.make("simulator")
        let issued = try authority.issueClientCertificate(topic: topic)
        try issued.write(certificateTo: directory.path("client.pem"), privateKeyTo: directory.path("client.key"))
        let certificate = try APNsClient.ClientCertificate.load(
            certificatePath: directory.path("client.pem"),
            keyPath: directory.path("client.key")
        )
        return try await APNsSimulator.withRunning(configuration) { simulator in
            try await body(
                Context(
                    simulator: simulator,
                    certificate: certificate,
                    trustRoots: .caFile(simulator.caCertificatePath!)
                )
            )
        }
    }

    static func notification() throws -> PreparedNotification {
        PreparedNotification(
            try NotificationContent(
                topic: Topic(topic),
                pushType: .alert,
                priority: .immediate,
                payload: Payload(jsonString: #"{"aps":{"alert":"legacy"}}"#)
            )
        )
    }

    /// Submits one notification to each of devices 1...count, tagged with the device number.
    static func submit(_ sender: LegacySender, count: Int, to receiver: LegacyOutcomes) throws {
        let notification = try notification()
        sender.submit(
            (1...count).map {
                APNsRequest(notification: notification, deviceToken: token($0), tag: UInt64($0), receiver: receiver)
            }
        )
    }
}

@Suite("Legacy transport against the simulator", .timeLimit(.minutes(3)))
struct LegacyTransportTests {
    @Test(
        "1,000 notifications through the dispatcher and SQLite, number 500's token marked bad: 999 arrive exactly once, 500 fails and its device is invalidated"
    )
    func rejectsNumber500() async throws {
        try await LegacyFixture.with { context in
            let directory = try TemporaryDirectory()
            let store = try SQLiteStore(path: directory.path("legacy.db"))
            defer { try? store.close() }
            let now = Date()
            _ = try await store.register(
                batch: (1...1000).map { Registration(token: LegacyFixture.token($0), group: "legacy", at: now) }
            )
            context.simulator.markBad(LegacyFixture.token(500).hex)

            // The quiet time is generous: on a loaded machine the error response must still arrive
            // within it, or the notifications after 500 would count as delivered (see docs/legacy.md).
            try await context.withSender({ $0.confirmationQuietTime = .seconds(3) }) { sender in
                var dispatcherConfiguration = Dispatcher.Configuration(instanceID: InstanceID("legacy-test"))
                dispatcherConfiguration.idleInterval = .milliseconds(50)
                let dispatcher = Dispatcher(
                    store: store,
                    routes: [
                        Registration.defaultApp: DeliveryRoute(transport: sender, topic: try Topic(LegacyFixture.topic))
                    ],
                    configuration: dispatcherConfiguration,
                    logger: TestLogger.make("dispatch")
                )
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await dispatcher.run() }
                    let id = try RequestID("legacy-1000")
                    _ = try await dispatcher.submit(
                        NotificationRequest(
                            id: id,
                            groups: ["legacy"],
                            payload: Payload(jsonString: #"{"aps":{"alert":"one of a thousand"}}"#),
                            createdAt: now
                        )
                    )
                    try await eventually("request done", timeout: .seconds(120)) {
                        try await store.report(id)?.state == .done
                    }
                    let report = try #require(try await store.report(id))
                    let stats = context.simulator.legacyStats()
                    print(
                        "legacy 1,000 with #500 bad: report accepted=\(report.accepted) failed=\(report.failedByReason); gateway received=\(stats.received) accepted=\(stats.accepted) duplicates=\(stats.duplicates) error responses=\(stats.errorResponsesByStatus) connections=\(stats.connectionsOpened)"
                    )
                    #expect(report.accepted == 999)
                    #expect(report.failedByReason == ["BadDeviceToken": 1])
                    #expect(stats.accepted == 999)
                    #expect(stats.duplicates == 0)
                    #expect(stats.errorResponsesByStatus == [8: 1])
                    var notOnce: [Int] = []
                    for number in 1...1000 where number != 500 {
                        if context.simulator.legacyDeliveries(device: LegacyFixture.token(number).hex) != 1 {
                            notOnce.append(number)
                        }
                    }
                    #expect(notOnce.isEmpty, "not delivered exactly once: \(notOnce.prefix(10))")
                    #expect(context.simulator.legacyDeliveries(device: LegacyFixture.token(500).hex) == 0)
                    let device500 = try await store.device(
                        app: Registration.defaultApp,
                        token: LegacyFixture.token(500)
                    )
                    #expect(device500?.state == .invalid)
                    #expect(device500?.invalidReason == .badDeviceToken)
                    #expect(
                        try await store.device(app: Registration.defaultApp, token: LegacyFixture.token(499))?.state
                            == .valid
                    )
                    group.cancelAll()
                }
            }
        }
    }

    @Test(
        "Shutdown after 300: the gateway's last processed is delivered, everything after it resent once, nothing twice"
    )
    func shutdownResendsTheRest() async throws {
        try await LegacyFixture.with { context in
            context.simulator.legacyFaults = LegacyGatewayFaults(shutdownAfter: 300)
            let outcomes = LegacyOutcomes()
            try await context.withSender({ $0.confirmationQuietTime = .seconds(2) }) { sender in
                try LegacyFixture.submit(sender, count: 1000, to: outcomes)
                try await eventually("1,000 outcomes") { outcomes.count >= 1000 }
            }
            let stats = context.simulator.legacyStats()
            print(
                "legacy Shutdown after 300: gateway accepted=\(stats.accepted) duplicates=\(stats.duplicates) connections=\(stats.connectionsOpened) error responses=\(stats.errorResponsesByStatus)"
            )
            #expect(outcomes.count == 1000, "one outcome per notification")
            #expect(outcomes.all.values.allSatisfy { $0.count == 1 && $0[0].isAccepted })
            #expect(stats.errorResponsesByStatus == [10: 1])
            #expect(stats.accepted == 1000)
            #expect(stats.duplicates == 0)
            #expect(stats.connectionsOpened >= 2)
            for number in 1...1000 {
                #expect(context.simulator.legacyDeliveries(device: LegacyFixture.token(number).hex) == 1)
            }
        }
    }

    /// The rule: a connection lost without an error response leaves everything unconfirmed of unknown
    /// fate, so all of it is resent. Duplicates are possible exactly for what the gateway processed
    /// before the loss but the sender had not yet confirmed. With a quiet time of an hour nothing is
    /// confirmed before the loss, so exactly the 300 the gateway processed arrive twice; a Shutdown
    /// then confirms the rest, naming the last one processed.
    @Test(
        "connection lost without an error response: the unconfirmed are resent; duplicates only among what the gateway had processed"
    )
    func connectionLossResendsUnconfirmed() async throws {
        try await LegacyFixture.with { context in
            context.simulator.legacyFaults = LegacyGatewayFaults(dropAfter: 300)
            let outcomes = LegacyOutcomes()
            try await context.withSender({ $0.confirmationQuietTime = .seconds(3600) }) { sender in
                try LegacyFixture.submit(sender, count: 1000, to: outcomes)
                try await eventually("300 before the loss and 1,000 after") {
                    context.simulator.legacyStats().accepted == 1300
                }
                #expect(outcomes.count == 0, "nothing is confirmed before its quiet time or an answer")
                context.simulator.sendLegacyShutdown()
                try await eventually("1,000 outcomes") { outcomes.count >= 1000 }
            }
            let stats = context.simulator.legacyStats()
            print(
                "legacy connection loss after 300: gateway accepted=\(stats.accepted) duplicates=\(stats.duplicates) connections=\(stats.connectionsOpened)"
            )
            #expect(outcomes.count == 1000)
            #expect(outcomes.all.values.allSatisfy { $0.count == 1 && $0[0].isAccepted })
            #expect(stats.duplicates == 300)
            #expect(stats.errorResponsesByStatus == [10: 1])
            for number in 1...1000 {
                #expect((1...2).contains(context.simulator.legacyDeliveries(device: LegacyFixture.token(number).hex)))
            }
        }
    }

    @Test("what the protocol cannot carry is answered at once and never written")
    func refusedBeforeWriting() async throws {
        try await LegacyFixture.with { context in
            let outcomes = LegacyOutcomes()
            try await context.withSender({ $0.confirmationQuietTime = .milliseconds(200) }) { sender in
                let big = PreparedNotification(
                    try NotificationContent(
                        topic: Topic(LegacyFixture.topic),
                        pushType: .alert,
                        priority: .immediate,
                        payload: Payload(jsonString: #"{"a":""# + String(repeating: "x", count: 2100) + #""}"#)
                    )
                )
                let short = try DeviceToken(hex: String(repeating: "ab", count: 16))
                sender.submit([
                    APNsRequest(notification: big, deviceToken: LegacyFixture.token(1), tag: 1, receiver: outcomes),
                    APNsRequest(
                        notification: try LegacyFixture.notification(),
                        deviceToken: short,
                        tag: 2,
                        receiver: outcomes
                    ),
                    APNsRequest(
                        notification: try LegacyFixture.notification(),
                        deviceToken: LegacyFixture.token(3),
                        tag: 3,
                        receiver: outcomes
                    ),
                ])
                try await eventually("three outcomes") { outcomes.count == 3 }
            }
            #expect(outcomes.all[1]?.first?.reason == .payloadTooLarge)
            #expect(outcomes.all[2]?.first?.reason == .badDeviceToken)
            #expect(outcomes.all[3]?.first?.isAccepted == true)
            #expect(context.simulator.legacyStats().received == 1)
        }
    }

    @Test("throughput: 20,000 notifications in batched writes over pooled connections", .timeLimit(.minutes(3)))
    func throughput() async throws {
        try await LegacyFixture.with { context in
            let outcomes = LegacyOutcomes()
            let count = 20_000
            let start = ContinuousClock.now
            try await context.withSender({ $0.confirmationQuietTime = .milliseconds(200) }) { sender in
                try LegacyFixture.submit(sender, count: count, to: outcomes)
                try await eventually("gateway received all") { context.simulator.legacyStats().accepted == count }
                let written = ContinuousClock.now - start
                try await eventually("all confirmed") { outcomes.count == count }
                let stats = context.simulator.legacyStats()
                print(
                    "legacy throughput: \(count) notifications written in \(written), confirmed in \(ContinuousClock.now - start); connections=\(stats.connectionsOpened)"
                )
                #expect(stats.connectionsOpened <= 4, "pooled: never one connection per notification")
            }
            #expect(outcomes.all.values.allSatisfy { $0.count == 1 && $0[0].isAccepted })
        }
    }
}

@Suite("Legacy feedback poller against the simulator", .timeLimit(.minutes(2)))
struct LegacyFeedbackTests {
    @Test("devices on the feedback list are pruned; one registered again after its feedback timestamp is kept")
    func prunesAndKeeps() async throws {
        try await LegacyFixture.with { context in
            let directory = try TemporaryDirectory()
            let store = try SQLiteStore(path: directory.path("feedback.db"))
            defer { try? store.close() }
            let clock = ManualWallClock(Date(timeIntervalSince1970: 1_800_000_000))
            let registeredAt = Date(timeIntervalSince1970: 1_799_990_000)
            let uninstalledAt = Date(timeIntervalSince1970: 1_799_995_000)
            for number in 1...4 {
                _ = try await store.register(
                    Registration(token: LegacyFixture.token(number), group: "g", at: registeredAt)
                )
            }
            // Device 2 was registered again after APNs saw it uninstalled: it is still alive.
            _ = try await store.register(
                Registration(token: LegacyFixture.token(2), group: "g", at: uninstalledAt.addingTimeInterval(60))
            )
            for number in [1, 2, 3] {
                context.simulator.markUnregistered(LegacyFixture.token(number).hex, at: uninstalledAt)
            }

            var configuration = FeedbackPoller.Configuration(
                endpoint: .init(host: "127.0.0.1", port: context.simulator.feedbackPort!),
                app: Registration.defaultApp,
                certificate: context.certificate,
                trustRoots: context.trustRoots
            )
            configuration.interval = .seconds(3600)
            let poller = FeedbackPoller(
                configuration: configuration,
                registry: store,
                clock: clock,
                logger: TestLogger.make("feedback")
            )
            let result = try await poller.pollOnce()
            print("legacy feedback poll: \(result)")
            #expect(result.read == 3)
            #expect(result.pruned == 2)
            #expect(result.keptRegisteredLater == 1)
            #expect(result.readError == nil)
            for (number, expected) in [(1, DeviceState.invalid), (2, .valid), (3, .invalid), (4, .valid)] {
                #expect(
                    try await store.device(app: Registration.defaultApp, token: LegacyFixture.token(number))?.state
                        == expected,
                    "device \(number)"
                )
            }
            #expect(
                try await store.device(app: Registration.defaultApp, token: LegacyFixture.token(1))?.invalidReason
                    == .unregistered
            )
            let again = try await poller.pollOnce()
            #expect(again.read == 0, "the service forgets what it reported")
        }
    }

    @Test("as a service, the first poll runs at start-up")
    func firstPollAtStartUp() async throws {
        try await LegacyFixture.with { context in
            let directory = try TemporaryDirectory()
            let store = try SQLiteStore(path: directory.path("feedback.db"))
            defer { try? store.close() }
            _ = try await store.register(
                Registration(token: LegacyFixture.token(1), group: "g", at: Date(timeIntervalSince1970: 1_700_000_000))
            )
            context.simulator.markUnregistered(
                LegacyFixture.token(1).hex,
                at: Date(timeIntervalSince1970: 1_700_000_100)
            )
            var configuration = FeedbackPoller.Configuration(
                endpoint: .init(host: "127.0.0.1", port: context.simulator.feedbackPort!),
                app: Registration.defaultApp,
                certificate: context.certificate,
                trustRoots: context.trustRoots
            )
            configuration.interval = .seconds(86_400)
            let poller = FeedbackPoller(
                configuration: configuration,
                registry: store,
                clock: SystemWallClock(),
                logger: TestLogger.make("feedback")
            )
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await poller.run() }
                try await eventually("device pruned") {
                    try await store.device(app: Registration.defaultApp, token: LegacyFixture.token(1))?.state
                        == .invalid
                }
                group.cancelAll()
            }
        }
    }
}
