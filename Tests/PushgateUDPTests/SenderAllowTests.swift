import Foundation
import Logging
import PushgateCore
import PushgateUDP
import Synchronization
import Testing

@Suite("UDP ingress: udp.allow refuses strangers before parsing; rejection warnings are one line a second")
struct SenderAllowTests {
    static let token = UDPIngressTests.token

    /// Runs an ingress on 127.0.0.1 (ports 0) with `configuration`'s sender ranges, then stops it.
    func withIngress(
        allowedSenders: [CIDRRange]?,
        registry: FakeRegistry = FakeRegistry(),
        intake: FakeIntake = FakeIntake(knownGroups: ["Choom"]),
        clock: any WallClock = ManualWallClock(UDPIngressTests.start),
        logger: Logger = Logger(label: "pushgate.udp.test"),
        _ body: (UDPIngressTests.Running) async throws -> Void
    ) async throws {
        var configuration = UDPIngressTests.loopback
        configuration.allowedSenders = allowedSenders
        let observer = WaitingObserver()
        let ingress = UDPIngress(
            configuration: configuration,
            registry: registry,
            intake: intake,
            clock: clock,
            observer: observer,
            logger: logger
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await ingress.run() }
            let bound = try await ingress.boundAddresses()
            do {
                try await body(
                    UDPIngressTests.Running(ingress: ingress, bound: bound, observer: observer, sender: try UDPSender())
                )
            } catch {
                group.cancelAll()
                throw error
            }
            group.cancelAll()
            try await group.waitForAll()
        }
    }

    static func ranges(_ texts: String...) throws -> [CIDRRange] {
        try texts.map { try CIDRRange(parsing: $0) }
    }

    @Test("a datagram from a sender outside udp.allow is refused unparsed, counted, and changes nothing")
    func refusedSenderChangesNothing() async throws {
        let registry = FakeRegistry()
        let intake = FakeIntake(knownGroups: ["Choom"])
        let lines = CapturingLogHandler.Lines()
        let logger = Logger(label: "pushgate.udp.test") { _ in CapturingLogHandler(lines: lines) }
        // 127.0.0.1 (the sender) is not in these.
        let allow = try Self.ranges("10.0.0.0/8", "2001:db8::/32")
        try await withIngress(allowedSenders: allow, registry: registry, intake: intake, logger: logger) { running in
            try running.register(#"{"device": "\#(Self.token)", "group": "Choom"}"#)
            try running.notify(#"{"groups": ["Choom"], "payload": {"aps": {"alert": "hi"}}}"#)
            try running.notify("not even JSON")
            #expect(await running.observer.wait { $0.registration.refused == 1 && $0.notification.refused == 2 })
            let statistics = running.ingress.statistics
            #expect(statistics.registration.applied == 0 && statistics.notification.applied == 0)
            #expect(
                statistics.registration.rejected.isEmpty && statistics.notification.rejected.isEmpty,
                "never parsed"
            )
            #expect(statistics.registration.inFlight == 0 && statistics.notification.inFlight == 0)
        }
        #expect(registry.memberships.isEmpty)
        #expect(registry.batchSizes.isEmpty, "the registry was never written to")
        #expect(intake.attempts == 0, "nothing was submitted")
        let refusals = lines.all.filter { $0.message.hasPrefix("Datagram refused") }
        #expect(refusals.count == 2, "one line per port and reason within the second: \(refusals)")
        #expect(refusals.allSatisfy { $0.metadata["udp.reason"] == "sender_not_allowed" })
    }

    @Test("a sender inside udp.allow is served as before")
    func allowedSenderIsServed() async throws {
        let registry = FakeRegistry()
        try await withIngress(allowedSenders: try Self.ranges("192.0.2.0/24", "127.0.0.1"), registry: registry) {
            running in
            try running.register(#"{"device": "\#(Self.token)", "group": "Choom"}"#)
            #expect(await running.observer.wait { $0.registration.applied == 1 })
            #expect(running.ingress.statistics.registration.refused == 0)
        }
        #expect(registry.memberships.count == 1)
    }

    @Test("100,000 bad datagrams as fast as they can be sent write at most one warning line a second")
    func floodOfBadDatagramsIsFewLines() async throws {
        let lines = CapturingLogHandler.Lines()
        var logger = Logger(label: "pushgate.udp.test") { _ in CapturingLogHandler(lines: lines) }
        logger.logLevel = .info
        let total = 100_000
        let batch = 2_000
        let started = ContinuousClock.now
        // The real clock: the limit is per second of wall time.
        try await withIngress(allowedSenders: nil, clock: SystemWallClock(), logger: logger) { running in
            for sent in stride(from: batch, through: total, by: batch) {
                for _ in 0..<batch { try running.notify("{bad") }
                // Each batch is read before the next is sent, so the kernel's buffer never overflows.
                #expect(await running.observer.wait { $0.notification.rejectedTotal >= sent })
            }
            #expect(running.ingress.statistics.notification.rejected == ["malformed_json": total])
        }
        let elapsed = ContinuousClock.now - started
        let warnings = lines.all.filter { $0.level >= .warning }
        let seconds = Int(elapsed.components.seconds) + 1
        #expect(warnings.count >= 1)
        #expect(warnings.count <= seconds + 1, "one line a second (\(warnings.count) in \(elapsed))")
        if elapsed <= .seconds(10) {
            #expect(warnings.count <= 20)
        }
        // Every datagram is accounted for: on a line of its own or in a later line's udp.repeated.
        let reported = warnings.reduce(0) { sum, line in
            sum + (line.metadata["udp.repeated"].map { Int("\($0)")! } ?? 1)
        }
        // (What the last second suppressed waits for a line that never came.)
        #expect(reported >= 1 && reported <= total)
        print("flood: \(total) bad datagrams in \(elapsed), \(warnings.count) warning lines")
    }
}
