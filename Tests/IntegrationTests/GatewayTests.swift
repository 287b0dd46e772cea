import APNsSimulator
import Foundation
import Logging
import PushgateCore
import PushgateGateway
import PushgateSQLite
import Synchronization
import Testing

/// The gateway end to end: real UDP datagrams in, the real SQLite store, the real APNs client, the
/// simulator as APNs.
@Suite("Gateway end to end over UDP", .timeLimit(.minutes(5)))
struct GatewayTests {
    static func token(_ index: Int) -> String { String(format: "%064x", 0xabc000 + index) }

    static func register(_ context: GatewayFixture.Context, _ index: Int, group: String) {
        context.registration.send(#"{"device": "\#(token(index))", "group": "\#(group)"}"#)
    }

    /// Registers device 1 in group "G", makes APNs answer 503 to everything, and submits a request to
    /// "G" with a known id and the given expiration.
    static func submitWhileAPNsIsUnavailable(
        _ context: GatewayFixture.Context,
        id: String,
        expiration: Expiration
    ) async throws -> RequestID {
        register(context, 1, group: "G")
        try await eventually("registered") { try await device(context, 1) != nil }
        try context.simulator.setFaults(SimulatorFaults(rate503: 1))
        let requestID = try RequestID(id)
        _ = try await context.gateway.intake.submit(
            NotificationRequest(
                id: requestID,
                app: "default",
                groups: ["G"],
                devices: [],
                pushType: .alert,
                priority: .immediate,
                expiration: expiration,
                collapseID: nil,
                payload: Payload(jsonString: #"{"n":1}"#),
                createdAt: Date()
            )
        )
        return requestID
    }

    static func device(_ context: GatewayFixture.Context, _ index: Int) async throws -> DeviceRecord? {
        try await context.gateway.store.device(app: "default", token: DeviceToken(hex: token(index)))
    }

    @Test("the C pushd README walkthrough: register a device, notify its group, APNs gets it")
    func pushdWalkthrough() async throws {
        try await GatewayFixture.with { context in
            let device = "be6406fe9e686c11f999c9d47e33b41be56be48f0c77570423bb89f5b51cf127"
            context.registration.send(#"{"device": "\#(device)", "group": "Choom"}"#)
            try await eventually("registration applied") {
                try await context.gateway.store.device(app: "default", token: DeviceToken(hex: device)) != nil
            }
            context.notification.send(
                #"{"groups": ["Choom"], "type": "urgent", "payload": {"aps": {"alert": "Hello world!"}}}"#
            )
            try await eventually("notification delivered") { !context.simulator.notifications(device: device).isEmpty }
            let recorded = try #require(context.simulator.notifications(device: device).first)
            #expect(recorded.headers["apns-priority"] == "10")
            #expect(recorded.headers["apns-push-type"] == "alert")
            #expect(recorded.topic == GatewayFixture.topic)
            #expect(recorded.payloadString == #"{"aps": {"alert": "Hello world!"}}"#, "the payload's bytes as sent")
        }
    }

    @Test("one notification per device even when it is in several target groups")
    func dedupeAcrossOverlappingGroups() async throws {
        try await GatewayFixture.with { context in
            for index in 0..<30 { Self.register(context, index, group: "A") }
            for index in 20..<50 { Self.register(context, index, group: "B") }
            try await eventually("registrations applied") {
                let a = try? await context.gateway.store.devices(app: "default", group: "A", after: nil, limit: 100)
                    .devices.count
                let b = try? await context.gateway.store.devices(app: "default", group: "B", after: nil, limit: 100)
                    .devices.count
                return a == 30 && b == 30
            }
            context.notification.send(#"{"groups": ["A", "B"], "type": "normal", "payload": {"aps": {"alert": "x"}}}"#)
            try await eventually("50 devices reached") { context.simulator.stats().accepted >= 50 }
            for index in 0..<50 {
                #expect(context.simulator.deliveries(device: Self.token(index)).accepted == 1, "device \(index)")
            }
            #expect(context.simulator.stats().accepted == 50)
        }
    }

    @Test("every malformed datagram is rejected whole and changes nothing")
    func malformedDatagramsChangeNothing() async throws {
        try await GatewayFixture.with { context in
            Self.register(context, 1, group: "G")
            try await eventually("good registration") { try await Self.device(context, 1) != nil }
            let badRegistrations = [
                "not json", "[]", #"{"device": "abc", "group": "G"}"#, #"{"device": "\#(Self.token(2))"}"#,
                #"{"device": "\#(Self.token(2))", "group": ""}"#,
                #"{"device": "\#(Self.token(2))", "group": "G", "extra": 1}"#,
                #"{"device": 12, "group": "G"}"#, #"{"device": ["\#(Self.token(2))"], "group": "G"}"#,
                #"{"device": "\#(Self.token(2))", "group": "G", "group": "H"}"#,
            ]
            for datagram in badRegistrations { context.registration.send(datagram) }
            let badNotifications = [
                "{", #"{"groups": ["G"]}"#, #"{"groups": "G", "payload": {}}"#,
                #"{"groups": ["G"], "type": "loud", "payload": {}}"#,
                #"{"groups": ["G"], "payload": {}, "bogus": 1}"#,
                #"{"groups": ["G"], "expiration": "1", "payload": {}}"#,
                #"{"groups": ["G"], "key": "\#(String(repeating: "k", count: 65))", "payload": {}}"#,
                #"{"groups": ["G"], "payload": {"big": "\#(String(repeating: "x", count: 5000))"}}"#,
                #"{"groups": [], "payload": {}}"#, #"{"groups": ["nosuchgroup"], "payload": {}}"#,
                #"{"groups": ["G"], "payload": []}"#,
            ]
            for datagram in badNotifications { context.notification.send(datagram) }
            // A good datagram after the bad ones proves the daemon kept running and is the only effect.
            Self.register(context, 3, group: "G")
            // The two ports are independent: let the registration land before the notification.
            try await eventually("second good registration") { try await Self.device(context, 3) != nil }
            context.notification.send(#"{"groups": ["G"], "payload": {"n": 1}}"#)
            try await eventually("good notification delivered") { context.simulator.stats().accepted >= 2 }
            #expect(try await Self.device(context, 2) == nil)
            #expect(context.simulator.stats().received == 2, "only the good notification went out, to devices 1 and 3")
            let groups = try await context.gateway.store.devices(app: "default", group: "G", after: nil, limit: 10)
                .devices.count
            #expect(groups == 2)
        }
    }

    @Test("410 invalidates the device unless it registered again after Apple's timestamp")
    func unregisteredPrunesButRespectsReRegistration() async throws {
        try await GatewayFixture.with { context in
            Self.register(context, 1, group: "G")
            Self.register(context, 2, group: "G")
            try await eventually("registered") {
                let first = try await Self.device(context, 1)
                let second = try await Self.device(context, 2)
                return first != nil && second != nil
            }
            // Device 1: Apple saw it die after it registered. Device 2: it registered after Apple's time.
            context.simulator.markUnregistered(Self.token(1), at: Date().addingTimeInterval(3600))
            context.simulator.markUnregistered(Self.token(2), at: Date(timeIntervalSince1970: 1_600_000_000))
            context.notification.send(#"{"groups": ["G"], "payload": {"n": 1}}"#)
            try await eventually("device 1 invalidated") { try await Self.device(context, 1)?.state == .invalid }
            #expect(try await Self.device(context, 1)?.invalidReason == .unregistered)
            try await eventually("both answered") { context.simulator.stats().rejectedByReason["Unregistered"] == 2 }
            #expect(try await Self.device(context, 2)?.state == .valid)
            // Later requests skip the invalid device.
            context.simulator.clearDeviceState(Self.token(2))
            context.notification.send(#"{"groups": ["G"], "payload": {"n": 2}}"#)
            try await eventually("device 2 reached") { context.simulator.stats().accepted == 1 }
            #expect(context.simulator.stats().received == 3, "device 1 was not sent the second notification")
        }
    }

    @Test("BadDeviceToken invalidates the device; later requests skip it")
    func badDeviceTokenPrunes() async throws {
        // A lone BadDeviceToken is taken as genuine once the misconfiguration breaker's window (a minute by
        // default) has passed without a trip; a short window keeps this test quick.
        try await GatewayFixture.with(dispatcher: { $0.misconfiguration?.window = .seconds(2) }) { context in
            Self.register(context, 1, group: "G")
            Self.register(context, 2, group: "G")
            try await eventually("registered") {
                let first = try await Self.device(context, 1)
                let second = try await Self.device(context, 2)
                return first != nil && second != nil
            }
            context.simulator.markBad(Self.token(1))
            context.notification.send(#"{"groups": ["G"], "payload": {"n": 1}}"#)
            try await eventually("device 1 invalidated") { try await Self.device(context, 1)?.state == .invalid }
            #expect(try await Self.device(context, 1)?.invalidReason == .badDeviceToken)
            context.notification.send(#"{"groups": ["G"], "payload": {"n": 2}}"#)
            try await eventually("second notification to device 2") {
                context.simulator.deliveries(device: Self.token(2)).accepted == 2
            }
            #expect(context.simulator.stats().received == 3)
        }
    }

    @Test("503 is retried with back-off and the notification is delivered once")
    func serviceUnavailableIsRetried() async throws {
        try await GatewayFixture.with { context in
            let id = try await Self.submitWhileAPNsIsUnavailable(
                context,
                id: "retry-test-1",
                expiration: .at(epochSeconds: Int64(Date().timeIntervalSince1970) + 600)
            )
            try await eventually("503 answered") {
                (context.simulator.stats().rejectedByReason["ServiceUnavailable"] ?? 0) >= 2
            }
            try context.simulator.setFaults(.none)
            try await eventually("request done") { try await context.gateway.store.report(id)?.state == .done }
            let report = try #require(try await context.gateway.store.report(id))
            #expect(report.accepted == 1)
            #expect(report.failed == 0)
            #expect(context.simulator.deliveries(device: Self.token(1)).accepted == 1)
        }
    }

    @Test("retries stop when the notification expires")
    func expirationStopsRetries() async throws {
        try await GatewayFixture.with { context in
            let id = try await Self.submitWhileAPNsIsUnavailable(
                context,
                id: "expiry-test-1",
                // Long enough for a first attempt and a retry (1 s back-off) on a daemon starved by CI's
                // full parallel run: with 15 s, one attempt was all it made there (issue #27).
                expiration: .at(epochSeconds: Int64(Date().timeIntervalSince1970) + 45)
            )
            try await eventually("request finished", timeout: .seconds(240)) {
                try await context.gateway.store.report(id)?.state.isFinished == true
            }
            let report = try #require(try await context.gateway.store.report(id))
            #expect(report.accepted == 0)
            #expect(report.failed == 1)
            #expect(report.pendingRetries == 0)
            let attempts = context.simulator.stats().received
            #expect(attempts >= 2, "it was retried before it expired")
            // Nothing more is sent for it: a later request reaches APNs and is the only new traffic.
            try context.simulator.setFaults(.none)
            context.notification.send(#"{"groups": ["G"], "payload": {"n": 2}}"#)
            try await eventually("later request delivered") { context.simulator.stats().accepted == 1 }
            #expect(context.simulator.stats().received == attempts + 1)
        }
    }

    @Test("expiration 0 gets a few attempts within a short window, then is recorded as failed")
    func immediateExpirationGivesUp() async throws {
        try await GatewayFixture.with { context in
            let id = try await Self.submitWhileAPNsIsUnavailable(
                context,
                id: "immediate-test-1",
                expiration: .immediately
            )
            try await eventually("request finished") {
                try await context.gateway.store.report(id)?.state.isFinished == true
            }
            let report = try #require(try await context.gateway.store.report(id))
            #expect(report.failedByReason["ServiceUnavailable"] == 1)
            #expect(context.simulator.stats().received == 3, "the default policy: three attempts")
        }
    }

    @Test("devices listed directly are sent to, once, alongside groups")
    func directDevices() async throws {
        try await GatewayFixture.with { context in
            Self.register(context, 1, group: "G")
            try await eventually("registered") { try await Self.device(context, 1) != nil }
            context.notification.send(
                #"{"groups": ["G"], "devices": ["\#(Self.token(1))", "\#(Self.token(9))"], "payload": {"n": 1}}"#
            )
            try await eventually("both reached") { context.simulator.stats().accepted == 2 }
            #expect(context.simulator.deliveries(device: Self.token(1)).accepted == 1)
            #expect(context.simulator.deliveries(device: Self.token(9)).accepted == 1)
        }
    }
}

/// The claim of an instance id (PostgreSQL's rule, on the SQLite store's heartbeat table, which follows
/// the same contract), with a wall clock that moves only when the claim sleeps.
@Suite("Instance id claim: one live process per id")
struct InstanceClaimTests {
    static let id = InstanceID("shared")
    static let timeToLive = Duration.seconds(15)

    /// A fresh store whose id `holder` claimed now.
    static func claimed(by holder: String) async throws -> (TemporaryDirectory, SQLiteStore, ManualWallClock) {
        let directory = try TemporaryDirectory()
        let store = try SQLiteStore(path: directory.path("claims.db"))
        let clock = ManualWallClock()
        try await store.claimInstance(id, holder: holder, now: clock.now(), timeToLive: timeToLive)
        return (directory, store, clock)
    }

    @Test("a claim its holder keeps renewing is refused after one time to live; the work never starts")
    func liveHolderRefused() async throws {
        let (directory, store, clock) = try await Self.claimed(by: "other")
        defer { withExtendedLifetime(directory) {} }
        let started = Mutex(false)
        let claim = InstanceClaim(
            leases: store,
            id: Self.id,
            holder: "me",
            timeToLive: Self.timeToLive,
            clock: clock,
            logger: Logger(label: "test"),
            onClaimed: { started.withLock { $0 = true } },
            work: { started.withLock { $0 = true } },
            sleep: { duration in
                clock.advance(by: Double(duration.components.seconds))
                // The other process is alive: it renews while we wait.
                try await store.renewInstance(Self.id, holder: "other", now: clock.now(), timeToLive: Self.timeToLive)
            }
        )
        await #expect(throws: Gateway.StartupError.self) { try await claim.run() }
        #expect(!started.withLock { $0 }, "refused before the work started, and never reported claimed (ready)")
        #expect(clock.now() >= ManualWallClock().now().addingTimeInterval(15), "waited one time to live first")
    }

    @Test("a claim left by a dead holder is waited out and taken over, renewed while the work runs, released after")
    func deadHolderTakenOver() async throws {
        let (directory, store, clock) = try await Self.claimed(by: "crashed")
        defer { withExtendedLifetime(directory) {} }
        let (renewedTwice, signal) = AsyncStream<Void>.makeStream()
        let renewSleeps = Mutex(0)
        let claimedAt = Mutex<Date?>(nil)
        let claim = InstanceClaim(
            leases: store,
            id: Self.id,
            holder: "me",
            timeToLive: Self.timeToLive,
            clock: clock,
            logger: Logger(label: "test"),
            onClaimed: { claimedAt.withLock { $0 = clock.now() } },
            work: {
                // Readiness heard of the claim before the work started, once the dead holder's claim lapsed.
                #expect(claimedAt.withLock { $0 }.map { $0 >= ManualWallClock().now().addingTimeInterval(15) } == true)
                for await _ in renewedTwice { break }
                // 15 s after the claim: without the two renewals it would have lapsed by now.
                await #expect(throws: StoreError.instanceIDInUse(Self.id)) {
                    try await store.claimInstance(
                        Self.id,
                        holder: "next",
                        now: clock.now(),
                        timeToLive: Self.timeToLive
                    )
                }
            },
            sleep: { duration in
                clock.advance(by: Double(duration.components.seconds))
                guard duration == Self.timeToLive / 3 else { return }
                // The third renewal sleep: two renewals happened; hold here until the work ends.
                if renewSleeps.withLock({
                    $0 += 1
                    return $0
                }) == 3 {
                    signal.yield()
                    try await Task.sleep(for: .seconds(3_600))
                }
            }
        )
        try await claim.run()
        // Released: the next process claims the id at once.
        try await store.claimInstance(Self.id, holder: "next", now: clock.now(), timeToLive: Self.timeToLive)
    }
}
