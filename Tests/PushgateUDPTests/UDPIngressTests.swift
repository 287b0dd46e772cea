import Foundation
import Logging
import NIOCore
import PushgateCore
import PushgateUDP
import Synchronization
import Testing

@Suite("UDP ingress over real sockets")
struct UDPIngressTests {
    static let token = "be6406fe9e686c11f999c9d47e33b41be56be48f0c77570423bb89f5b51cf127"
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    /// 127.0.0.1, both ports picked by the kernel.
    static let loopback = UDPIngress.Configuration(host: "127.0.0.1", registrationPort: 0, notificationPort: 0)

    struct Running {
        var ingress: UDPIngress
        var bound: UDPIngress.BoundAddresses
        var observer: WaitingObserver
        var sender: UDPSender

        func register(_ text: String) throws { try sender.send(text, to: bound.registrationPort) }
        func notify(_ text: String) throws { try sender.send(text, to: bound.notificationPort) }
    }

    /// Runs an ingress on 127.0.0.1 with ports 0 for `body`, then cancels it and waits for it to stop.
    func withIngress(
        registry: FakeRegistry = FakeRegistry(),
        intake: FakeIntake = FakeIntake(knownGroups: ["Choom"]),
        configuration: UDPIngress.Configuration = loopback,
        logger: Logger = Logger(label: "pushgate.udp.test"),
        _ body: (Running) async throws -> Void
    ) async throws {
        let observer = WaitingObserver()
        let ids = Atomic<Int>(0)
        let ingress = UDPIngress(
            configuration: configuration,
            registry: registry,
            intake: intake,
            clock: ManualWallClock(Self.start),
            makeRequestID: { _ in try! RequestID("req-\(ids.add(1, ordering: .relaxed).newValue)") },
            observer: observer,
            logger: logger
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await ingress.run() }
            let bound = try await ingress.boundAddresses()
            #expect(bound.registrationPort != 0 && bound.notificationPort != 0)
            #expect(bound.registrationPort != bound.notificationPort)
            do {
                try await body(Running(ingress: ingress, bound: bound, observer: observer, sender: try UDPSender()))
            } catch {
                group.cancelAll()
                throw error
            }
            group.cancelAll()
            try await group.waitForAll()
        }
    }

    @Test("the C pushd README walkthrough: register a device, then notify its group")
    func readmeWalkthrough() async throws {
        let registry = FakeRegistry()
        let intake = FakeIntake(knownGroups: ["Choom"])
        try await withIngress(registry: registry, intake: intake) { running in
            try running.register(#"{"device": "\#(Self.token)", "group": "Choom"}"# + "\n")
            #expect(await running.observer.wait { $0.registration.applied == 1 })
            #expect(
                registry.memberships == [
                    .init(app: "default", token: try DeviceToken(hex: Self.token), group: "Choom")
                ]
            )

            try running.notify(
                #"{"groups": ["Choom"], "type": "urgent", "payload": {"aps": {"alert": "Hello world!"}}}"#
            )
            #expect(await running.observer.wait { $0.notification.applied == 1 })
            let request = try #require(intake.requests.first)
            #expect(request.id == (try RequestID("req-1")))
            #expect(request.groups == ["Choom"])
            #expect(request.pushType == .alert)
            #expect(request.priority == .immediate)
            #expect(request.createdAt == Self.start)
            #expect(request.payload.bytes == Array(#"{"aps": {"alert": "Hello world!"}}"#.utf8))

            let statistics = running.ingress.statistics
            #expect(statistics.registration.received == 1 && statistics.registration.rejectedTotal == 0)
            #expect(statistics.notification.received == 1 && statistics.notification.rejectedTotal == 0)
        }
    }

    @Test("a notification to a known and an unknown group is accepted (the C pushd delivered to the groups that exist)")
    func knownAndUnknownGroups() async throws {
        let intake = FakeIntake(knownGroups: ["Choom"])
        try await withIngress(registry: FakeRegistry(), intake: intake) { running in
            try running.notify(#"{"groups": ["Choom", "Nobody"], "payload": {"aps": {"alert": "hi"}}}"#)
            try running.notify(#"{"groups": ["Nobody", "Nobody2"], "payload": {"aps": {"alert": "hi"}}}"#)
            #expect(
                await running.observer.wait { $0.notification.applied == 1 && $0.notification.rejectedTotal == 1 }
            )
            #expect(intake.requests.map(\.groups) == [["Choom", "Nobody"]])
            #expect(running.ingress.statistics.notification.rejected == ["unknown_group": 1], "all unknown: rejected")
        }
    }

    @Test("bad datagrams change nothing, are counted by reason, and the listener keeps serving")
    func badDatagrams() async throws {
        let registry = FakeRegistry()
        let intake = FakeIntake(knownGroups: ["Choom"])
        var configuration = Self.loopback
        configuration.maximumDatagramBytes = 2_048
        try await withIngress(registry: registry, intake: intake, configuration: configuration) { running in
            let badRegistrations = [
                "", "not json", #"{"device": "\#(Self.token)", "group": "Choom""#, #"["\#(Self.token)"]"#,
                #"{"device": "\#(Self.token)", "group": "Choom", "bogus": 1}"#, #"{"device": "xyz", "group": "Choom"}"#,
                #"{"device": "\#(Self.token)", "group": ""}"#,
                #"{"device": "\#(Self.token)", "group": "a", "group": "b"}"#,
                #"{"device": "\#(Self.token)", "group": "\#(String(repeating: "x", count: 3_000))"}"#,
            ]
            let badNotifications = [
                #"{"groups": ["Choom"]}"#, #"{"groups": "Choom", "payload": {}}"#,
                #"{"groups": ["Choom"], "payload": {}, "bogus": 1}"#,
                #"{"groups": ["Choom"], "type": "loud", "payload": {}}"#,
                #"{"groups": ["Choom"], "expiration": 1.5, "payload": {}}"#,
                #"{"groups": ["Choom"], "key": "\#(String(repeating: "k", count: 65))", "payload": {}}"#,
                #"{"groups": ["Choom"], "payload": {"x": "\#(String(repeating: "x", count: 1_900))"}}"#,  // fits
                #"{"groups": ["Choom"], "payload": {}}"#,  // good one in the middle
                #"{"groups": ["Nobody"], "payload": {}}"#,  // parses; the store does not know the group
            ]
            for datagram in badRegistrations { try running.register(datagram) }
            for datagram in badNotifications { try running.notify(datagram) }
            try running.register(#"{"device": "\#(Self.token)", "group": "Choom"}"#)

            #expect(
                await running.observer.wait {
                    $0.registration.applied == 1 && $0.registration.rejectedTotal == badRegistrations.count
                        && $0.notification.applied == 2 && $0.notification.rejectedTotal == 7
                }
            )
            let statistics = running.ingress.statistics
            #expect(
                statistics.registration.rejected == [
                    "malformed_json": 3, "not_an_object": 1, "unknown_key": 1, "invalid_token": 1, "invalid_group": 1,
                    "duplicate_key": 1, UDPIngressRejection.datagramTooLarge: 1,
                ]
            )
            #expect(
                statistics.notification.rejected == [
                    "missing_field": 1, "wrong_type": 2, "unknown_key": 1, "unknown_type": 1, "invalid_collapse_id": 1,
                    "unknown_group": 1,
                ]
            )
            #expect(registry.memberships.count == 1)
            #expect(intake.requests.count == 2)
            #expect(intake.requests.allSatisfy { $0.groups == ["Choom"] })
        }
    }

    @Test("a store failure in a batch costs only the registration that caused it")
    func storeFailureIsolated() async throws {
        let gate = Gate()
        let registry = FakeRegistry(gate: gate)
        let poisoned = try DeviceToken(hex: "dead" + String(repeating: "0", count: 60))
        registry.failRegistrations(of: poisoned)
        try await withIngress(registry: registry) { running in
            // The first batch holds the writer at the gate so the rest arrive as one batch.
            try running.register(#"{"device": "\#(Self.tokenNumber(0))", "group": "g"}"#)
            #expect(await running.observer.wait { $0.registration.received == 1 })
            try running.register(#"{"device": "\#(Self.tokenNumber(1))", "group": "g"}"#)
            try running.register(#"{"device": "\#(poisoned.hex)", "group": "g"}"#)
            try running.register(#"{"device": "\#(Self.tokenNumber(2))", "group": "g"}"#)
            #expect(await running.observer.wait { $0.registration.received == 4 })
            gate.open()
            #expect(await running.observer.wait { $0.registration.applied == 3 && $0.registration.rejectedTotal == 1 })
            #expect(running.ingress.statistics.registration.rejected == ["backend": 1])
            #expect(registry.memberships.count == 3)
            #expect(!registry.memberships.contains { $0.token == poisoned })
        }
    }

    @Test("a transient store error is retried until stored: nothing lost, in order; a permanent one is not")
    func transientStoreErrorsAreRetried() async throws {
        let intake = FakeIntake(knownGroups: ["Choom"])
        intake.failNext([.backend("disk full"), .backend("disk full"), .backend("disk full")])
        var configuration = Self.loopback
        configuration.storeRetryBackoff = Backoff(base: .milliseconds(1), cap: .milliseconds(2))
        try await withIngress(intake: intake, configuration: configuration) { running in
            for number in 1...5 {
                try running.notify(#"{"groups": ["Choom"], "key": "n\#(number)", "payload": {"n": \#(number)}}"#)
            }
            #expect(await running.observer.wait { $0.notification.applied == 5 })
            #expect(intake.requests.map(\.id.value) == (1...5).map { "req-\($0)" })
            #expect(intake.requests.map { $0.collapseID?.value } == (1...5).map { "n\($0)" })
            #expect(intake.attempts == 8, "three failed attempts, then one per request")
            #expect(running.ingress.statistics.notification.rejectedTotal == 0)

            intake.failNext([.unknownGroup(app: "default", group: "Choom")])
            try running.notify(#"{"groups": ["Choom"], "payload": {}}"#)
            #expect(await running.observer.wait { $0.notification.rejectedTotal == 1 })
            #expect(intake.attempts == 9, "a permanent error is not retried")
            #expect(running.ingress.statistics.notification.rejected == ["unknown_group": 1])
        }
    }

    @Test("registrations read during a store outage wait for it and are all applied when it is back")
    func registrationsWaitOutAnOutage() async throws {
        let registry = FakeRegistry()
        registry.beginOutage()
        var configuration = Self.loopback
        configuration.storeRetryBackoff = Backoff(base: .milliseconds(1), cap: .milliseconds(5))
        try await withIngress(registry: registry, configuration: configuration) { running in
            for number in 0..<30 {
                try running.register(#"{"device": "\#(Self.tokenNumber(number))", "group": "g"}"#)
            }
            #expect(await running.observer.wait { $0.registration.received == 30 })
            // Several rounds of failed writes: nothing is dropped meanwhile.
            let failedBefore = registry.attempts
            await registry.waitForAttempts(failedBefore + 3)
            #expect(running.ingress.statistics.registration.rejectedTotal == 0)
            #expect(registry.memberships.isEmpty)
            registry.endOutage()
            #expect(await running.observer.wait { $0.registration.applied == 30 })
            #expect(registry.memberships.count == 30)
            #expect(running.ingress.statistics.registration.rejectedTotal == 0)
        }
    }

    /// The batch of the other 29 fails (attempt 2), then the first `failedAlone` of its one-at-a-time writes: the
    /// outage ends during that pass (or, at 29, after it). Those tried before the end are not bad registrations.
    /// (`received` counts a datagram as it is read, before it is queued: the last may miss the batch and come
    /// in the next one, which leaves the outage ending inside the pass for 1-27.)
    @Test(
        "an outage that ends while a failed batch is written one at a time: every registration applied, none rejected",
        arguments: [0, 1, 14, 27, 29]
    )
    func outageEndingMidPass(failedAlone: Int) async throws {
        let gate = Gate()
        let registry = FakeRegistry(gate: gate)
        registry.failAttempts(2...(2 + failedAlone))
        var configuration = Self.loopback
        configuration.storeRetryBackoff = Backoff(base: .milliseconds(1), cap: .milliseconds(2))
        try await withIngress(registry: registry, configuration: configuration) { running in
            // The first write (attempt 1) holds the writer at the gate so that the other 29 arrive as one batch.
            try running.register(#"{"device": "\#(Self.tokenNumber(0))", "group": "g"}"#)
            await gate.untilHeld()
            for number in 1..<30 {
                try running.register(#"{"device": "\#(Self.tokenNumber(number))", "group": "g"}"#)
            }
            #expect(await running.observer.wait { $0.registration.received == 30 })
            gate.open()
            #expect(await running.observer.wait { $0.registration.applied == 30 })
            #expect(registry.memberships.count == 30)
            #expect(running.ingress.statistics.registration.rejectedTotal == 0)
            #expect(registry.attempts > 2 + failedAlone, "the failing attempts were all made")
        }
    }

    @Test("beyond the outage buffer a registration is dropped and counted; the ones kept are applied")
    func outageBufferOverflow() async throws {
        let registry = FakeRegistry()
        registry.beginOutage()
        var configuration = Self.loopback
        configuration.storeRetryBackoff = Backoff(base: .milliseconds(1), cap: .milliseconds(5))
        configuration.outageRegistrationLimit = 5
        try await withIngress(registry: registry, configuration: configuration) { running in
            try running.register(#"{"device": "\#(Self.tokenNumber(0))", "group": "g"}"#)
            // A batch write, one single write, then retries: the outage is declared before the first retry.
            await registry.waitForAttempts(3)
            for number in 1...20 {
                try running.register(#"{"device": "\#(Self.tokenNumber(number))", "group": "g"}"#)
            }
            #expect(
                await running.observer.wait { $0.registration.received == 21 && $0.registration.rejectedTotal == 15 }
            )
            #expect(running.ingress.statistics.registration.rejected == [UDPIngressRejection.storeOutageOverflow: 15])
            registry.endOutage()
            #expect(await running.observer.wait { $0.registration.applied == 6 })
            #expect(registry.memberships.count == 6)
        }
    }

    @Test("a storm of store failures writes one warning line per second, with a count, and drops nothing")
    func storeFailureStormIsOneLine() async throws {
        let registry = FakeRegistry()
        registry.beginOutage()
        let poisoned = try DeviceToken(hex: "dead" + String(repeating: "0", count: 60))
        let lines = CapturingLogHandler.Lines()
        let logger = Logger(label: "pushgate.udp.test") { _ in CapturingLogHandler(lines: lines) }
        var configuration = Self.loopback
        configuration.storeRetryBackoff = Backoff(base: .milliseconds(1), cap: .milliseconds(2))
        try await withIngress(registry: registry, configuration: configuration, logger: logger) { running in
            for _ in 1...50 {
                try running.register(#"{"device": "\#(poisoned.hex)", "group": "g"}"#)
            }
            #expect(await running.observer.wait { $0.registration.received == 50 })
            await registry.waitForAttempts(registry.attempts + 200)
            #expect(running.ingress.statistics.registration.rejectedTotal == 0)
            registry.endOutage()
            #expect(await running.observer.wait { $0.registration.applied == 50 })
        }
        // The ingress's clock does not move: every failure falls in the first second.
        let warnings = lines.all.filter { $0.level == .warning && $0.message.hasPrefix("Store out") }
        #expect(warnings.count == 1, "one line for hundreds of failed writes")
        let everything = lines.all.map { "\($0.message) \($0.metadata)" }.joined(separator: "\n")
        #expect(!everything.contains(poisoned.hex), "no full device token in any line, debug included")
    }

    @Test("register and remove are applied in arrival order, across apps")
    func removeInOrder() async throws {
        let registry = FakeRegistry()
        try await withIngress(registry: registry) { running in
            let device = #""device": "\#(Self.token)""#
            try running.register(#"{\#(device), "group": "a"}"#)
            try running.register(#"{\#(device), "group": "b"}"#)
            try running.register(#"{\#(device), "group": "a", "remove": true}"#)
            try running.register(#"{\#(device), "group": "a", "app": "other"}"#)
            #expect(await running.observer.wait { $0.registration.applied == 4 })
            let token = try DeviceToken(hex: Self.token)
            #expect(
                registry.memberships == [
                    .init(app: "default", token: token, group: "b"), .init(app: "other", token: token, group: "a"),
                ]
            )
        }
    }

    @Test("while the writer is busy, reads stop at the pending limit and the kernel keeps the rest")
    func backPressure() async throws {
        let gate = Gate()
        let registry = FakeRegistry(gate: gate)
        let total = 2_000
        var configuration = Self.loopback
        configuration.pendingRegistrationLimit = 100
        configuration.registrationBatchLimit = 50
        configuration.messagesPerRead = 2
        configuration.datagramsPerSystemCall = 8
        try await withIngress(registry: registry, configuration: configuration) { running in
            for number in 0..<total {
                try running.register(#"{"device": "\#(Self.tokenNumber(number))", "group": "g"}"#)
            }
            #expect(await running.observer.wait { $0.registration.received >= 100 })
            // The writer holds one batch at the gate; at most the pending limit plus one read cycle
            // (2 system calls of 8 datagrams) more was read, whatever the timing.
            #expect(running.ingress.statistics.registration.received <= 50 + 100 + 16)
            gate.open()
            #expect(await running.observer.wait { $0.registration.applied == total })
            #expect(registry.memberships.count == total)
            #expect(registry.batchSizes.allSatisfy { $0 <= 50 })
        }
    }

    @Test("on shutdown, registrations already read are still applied")
    func drainOnShutdown() async throws {
        let gate = Gate()
        let registry = FakeRegistry(gate: gate)
        let observer = WaitingObserver()
        let ingress = UDPIngress(
            configuration: .init(host: "127.0.0.1", registrationPort: 0, notificationPort: 0),
            registry: registry,
            intake: FakeIntake(knownGroups: []),
            observer: observer
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await ingress.run() }
            let bound = try await ingress.boundAddresses()
            let sender = try UDPSender()
            for number in 0..<10 {
                try sender.send(
                    #"{"device": "\#(Self.tokenNumber(number))", "group": "g"}"#,
                    to: bound.registrationPort
                )
            }
            #expect(await observer.wait { $0.registration.received == 10 })
            group.cancelAll()  // stop while the writer is held at the gate
            gate.open()
            try await group.waitForAll()
        }
        #expect(ingress.statistics.registration.applied == 10)
        #expect(registry.memberships.count == 10)
        await #expect(throws: (any Error).self) { try await ingress.boundAddresses() }
    }

    @Test("binding fails with a clear error when the port is taken")
    func portTaken() async throws {
        try await withIngress { running in
            let second = UDPIngress(
                configuration: .init(
                    host: "127.0.0.1",
                    registrationPort: running.bound.registrationPort,
                    notificationPort: 0
                ),
                registry: FakeRegistry(),
                intake: FakeIntake(knownGroups: [])
            )
            await #expect(throws: UDPIngressError.self) { try await second.run() }
            await #expect(throws: UDPIngressError.self) { try await second.boundAddresses() }
        }
    }

    @Test("configuration is validated before binding")
    func configurationValidated() async {
        var configuration = UDPIngress.Configuration(registrationPort: 7734, notificationPort: 7734)
        #expect(throws: UDPIngressError.invalidConfiguration(key: "notificationPort", message: "")) {
            try configuration.validate()
        }
        configuration = .init(registrationPort: 70_000)
        #expect(throws: UDPIngressError.invalidConfiguration(key: "registrationPort", message: "")) {
            try configuration.validate()
        }
        configuration = .init()
        configuration.maximumDatagramBytes = 10
        #expect(throws: UDPIngressError.invalidConfiguration(key: "maximumDatagramBytes", message: "")) {
            try configuration.validate()
        }
        #expect(throws: Never.self) { try UDPIngress.Configuration().validate() }
    }

    @Test("localhost binds every address it resolves to, on the same ports")
    func localhostEveryAddress() async throws {
        let ingress = UDPIngress(
            configuration: .init(host: "localhost", registrationPort: 0, notificationPort: 0),
            registry: FakeRegistry(),
            intake: FakeIntake(knownGroups: [])
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await ingress.run() }
            let bound = try await ingress.boundAddresses()
            #expect(!bound.registration.isEmpty)
            #expect(bound.registration.count == bound.notification.count)
            #expect(Set(bound.registration.map(\.port)).count == 1)
            #expect(Set(bound.notification.map(\.port)).count == 1)
            #expect(bound.registration.allSatisfy { $0.ipAddress == "127.0.0.1" || $0.ipAddress == "::1" })
            print("localhost resolved to \(bound.registration.compactMap(\.ipAddress))")
            group.cancelAll()
            try await group.waitForAll()
        }
    }

    @Test("a burst of 20,000 registrations is applied in full (rate printed)")
    func burst() async throws {
        let registry = FakeRegistry()
        let total = 20_000
        try await withIngress(registry: registry) { running in
            let datagrams = (0..<total).map { Array(#"{"device": "\#(Self.tokenNumber($0))", "group": "burst"}"#.utf8) }
            let clock = ContinuousClock()
            let started = clock.now
            for datagram in datagrams { try running.sender.send(datagram, to: running.bound.registrationPort) }
            let sent = clock.now - started
            let applied = await running.observer.wait(timeout: .seconds(120)) { $0.registration.applied == total }
            let elapsed = (running.observer.lastApplied ?? clock.now) - started
            let statistics = running.ingress.statistics
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            print(
                "UDP burst: \(statistics.registration.applied)/\(total) registrations applied in \(elapsed) "
                    + "(\(Int(Double(statistics.registration.applied) / seconds))/s; sent in \(sent)); "
                    + "\(statistics.registrationBatches) batches, largest \(statistics.largestRegistrationBatch); "
                    + "rejected \(statistics.registration.rejected)"
            )
            #expect(applied, "received \(statistics.registration.received), applied \(statistics.registration.applied)")
            #expect(registry.memberships.count == total)
        }
    }

    /// A distinct valid 32-byte token for each number.
    static func tokenNumber(_ number: Int) -> String {
        let hex = String(number, radix: 16)
        return String(repeating: "0", count: 64 - hex.count) + hex
    }
}
