import APNsSimulator
import Foundation
import NIOCore
import Testing

/// The simulator's legacy binary gateway and feedback ports, driven with hand-built bytes over TLS.
@Suite("Simulator legacy gateway and feedback", .timeLimit(.minutes(2)))
struct LegacyGatewayTests {
    static func tokenBytes(_ seed: UInt8) -> [UInt8] { [UInt8](repeating: seed, count: 32) }
    static let payload = Array(#"{"aps":{"alert":"hi"}}"#.utf8)

    static func be16(_ value: Int) -> [UInt8] { [UInt8(value >> 8 & 0xff), UInt8(value & 0xff)] }
    static func be32(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
    }

    static func simple(token: [UInt8], payload: [UInt8] = payload) -> [UInt8] {
        [0] + be16(token.count) + token + be16(payload.count) + payload
    }

    static func enhanced(id: UInt32, expiry: UInt32 = 0, token: [UInt8], payload: [UInt8] = payload) -> [UInt8] {
        [1] + be32(id) + be32(expiry) + be16(token.count) + token + be16(payload.count) + payload
    }

    static func frame(id: UInt32, token: [UInt8], payload: [UInt8] = payload, priority: UInt8 = 10) -> [UInt8] {
        let items =
            [1] + be16(token.count) + token + [2] + be16(payload.count) + payload + [3] + be16(4) + be32(id)
            + [4] + be16(4) + be32(0) + [5] + be16(1) + [priority]
        return [2] + be32(UInt32(items.count)) + items
    }

    static func configuration(clientCA: SimulatorCertificateAuthority? = nil) throws -> APNsSimulator.Configuration {
        var configuration = APNsSimulator.Configuration()
        configuration.legacyPort = 0
        configuration.feedbackPort = 0
        if let clientCA {
            configuration.tls = .authority(clientCA)
            configuration.clientCertificateAuthorityPEM = clientCA.certificatePEM
        }
        return configuration
    }

    static func probe(_ simulator: RunningAPNsSimulator, port: Int?) async throws -> LegacyGatewayProbe {
        try await LegacyGatewayProbe.connect(port: try #require(port), trustRootsPEM: simulator.caCertificatePEM)
    }

    static func waitFor(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw CancellationError() }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    @Test("all three formats are parsed and recorded, split across writes; success is never answered")
    func threeFormats() async throws {
        try await APNsSimulator.withRunning(try Self.configuration()) { simulator in
            let probe = try await Self.probe(simulator, port: simulator.legacyPort)
            let bytes =
                Self.simple(token: Self.tokenBytes(1))
                + Self.enhanced(id: 7, expiry: 1_900_000_000, token: Self.tokenBytes(2))
                + Self.frame(id: 9, token: Self.tokenBytes(3), priority: 5)
            // One byte at a time for the first message, the rest in two uneven pieces.
            for byte in bytes.prefix(40) { try await probe.send([byte]) }
            try await probe.send(Array(bytes[40..<100]))
            try await probe.send(Array(bytes[100...]))
            try await Self.waitFor("three accepted") { simulator.legacyStats().accepted == 3 }
            #expect(probe.received.isEmpty)
            #expect(probe.isOpen)
            let records = simulator.legacyNotifications()
            #expect(records.map(\.command) == [0, 1, 2])
            #expect(records.map(\.identifier) == [nil, 7, 9])
            #expect(records[1].expiry == 1_900_000_000)
            #expect(records[2].priority == 5)
            #expect(records[0].deviceToken == String(repeating: "01", count: 32))
            #expect(records[2].payloadString == #"{"aps":{"alert":"hi"}}"#)
            await probe.close()
        }
    }

    @Test(
        "a bad notification gets |8|status|identifier| and the connection closes; what followed it is discarded",
        arguments: [
            (UInt8(8), "marked bad"), (5, "31-byte token"), (7, "oversized payload"), (2, "no token"),
            (4, "no payload"),
        ]
    )
    func errorResponses(status: UInt8, what: String) async throws {
        try await APNsSimulator.withRunning(try Self.configuration()) { simulator in
            simulator.markBad(String(repeating: "0b", count: 32))
            let bad: [UInt8]
            switch status {
            case 8: bad = Self.frame(id: 42, token: Self.tokenBytes(0x0b))
            case 5: bad = Self.frame(id: 42, token: Array(Self.tokenBytes(1).prefix(31)))
            case 7: bad = Self.frame(id: 42, token: Self.tokenBytes(1), payload: [UInt8](repeating: 0x20, count: 2049))
            case 2: bad = Self.frame(id: 42, token: [])
            default: bad = Self.frame(id: 42, token: Self.tokenBytes(1), payload: [])
            }
            let probe = try await Self.probe(simulator, port: simulator.legacyPort)
            try await probe.send(
                Self.frame(id: 41, token: Self.tokenBytes(1)) + bad + Self.frame(id: 43, token: Self.tokenBytes(2))
            )
            let answer = try await probe.receiveUntilClosed()
            #expect(answer == [8, status] + Self.be32(42), "\(what)")
            let stats = simulator.legacyStats()
            #expect(stats.accepted == 1, "41 accepted, 43 discarded after the error")
            #expect(stats.errorResponsesByStatus[status] == 1)
            await probe.close()
        }
    }

    @Test("an enhanced notification's payload limit is 256 bytes, the frame's 2048")
    func payloadLimits() async throws {
        try await APNsSimulator.withRunning(try Self.configuration()) { simulator in
            let probe = try await Self.probe(simulator, port: simulator.legacyPort)
            try await probe.send(
                Self.enhanced(id: 1, token: Self.tokenBytes(1), payload: [UInt8](repeating: 0x20, count: 256))
                    + Self.frame(id: 2, token: Self.tokenBytes(1), payload: [UInt8](repeating: 0x20, count: 2048))
                    + Self.enhanced(id: 3, token: Self.tokenBytes(1), payload: [UInt8](repeating: 0x20, count: 257))
            )
            #expect(try await probe.receiveUntilClosed() == [8, 7] + Self.be32(3))
            #expect(simulator.legacyStats().accepted == 2)
            await probe.close()
        }
    }

    @Test("an unknown command is a protocol error (128) naming identifier 0")
    func unknownCommand() async throws {
        try await APNsSimulator.withRunning(try Self.configuration()) { simulator in
            let probe = try await Self.probe(simulator, port: simulator.legacyPort)
            try await probe.send([9, 1, 2, 3])
            #expect(try await probe.receiveUntilClosed() == [8, 128, 0, 0, 0, 0])
            await probe.close()
        }
    }

    @Test("told to shut down, a connection answers status 10 with the last identifier it processed")
    func shutdown() async throws {
        try await APNsSimulator.withRunning(try Self.configuration()) { simulator in
            let probe = try await Self.probe(simulator, port: simulator.legacyPort)
            try await probe.send(
                Self.frame(id: 100, token: Self.tokenBytes(1)) + Self.frame(id: 101, token: Self.tokenBytes(2))
            )
            try await Self.waitFor("two accepted") { simulator.legacyStats().accepted == 2 }
            simulator.sendLegacyShutdown()
            #expect(try await probe.receiveUntilClosed() == [8, 10] + Self.be32(101))
            await probe.close()
        }
    }

    @Test("the one-shot drop fault closes without an answer after N notifications, then clears")
    func dropFault() async throws {
        try await APNsSimulator.withRunning(try Self.configuration()) { simulator in
            simulator.legacyFaults = LegacyGatewayFaults(dropAfter: 2)
            let probe = try await Self.probe(simulator, port: simulator.legacyPort)
            try await probe.send((1...5).flatMap { Self.frame(id: $0, token: Self.tokenBytes(UInt8($0))) })
            #expect(try await probe.receiveUntilClosed().isEmpty)
            #expect(simulator.legacyStats().accepted == 2)
            #expect(simulator.legacyFaults == LegacyGatewayFaults())
            await probe.close()
        }
    }

    @Test("feedback: unregistered devices with their timestamps, once; then an empty list")
    func feedback() async throws {
        try await APNsSimulator.withRunning(try Self.configuration()) { simulator in
            simulator.markUnregistered(
                String(repeating: "aa", count: 32),
                at: Date(timeIntervalSince1970: 1_700_000_000.9)
            )
            simulator.markUnregistered(
                String(repeating: "bb", count: 32),
                at: Date(timeIntervalSince1970: 1_700_000_100)
            )
            simulator.markBad(String(repeating: "cc", count: 32))
            // Unregistered, then back to normal: not reported.
            simulator.markUnregistered(String(repeating: "dd", count: 32))
            simulator.clearDeviceState(String(repeating: "dd", count: 32))
            #expect(simulator.pendingFeedbackCount == 2)
            let first = try await Self.probe(simulator, port: simulator.feedbackPort)
            let bytes = try await first.receiveUntilClosed()
            await first.close()
            #expect(
                bytes == Self.be32(1_700_000_000) + Self.be16(32) + Self.tokenBytes(0xaa) + Self.be32(1_700_000_100)
                    + Self.be16(32) + Self.tokenBytes(0xbb)
            )
            let second = try await Self.probe(simulator, port: simulator.feedbackPort)
            #expect(try await second.receiveUntilClosed().isEmpty, "cleared once read")
            await second.close()
            #expect(simulator.legacyStats().feedbackTuplesServed == 2)
        }
    }

    @Test("with a client CA, a legacy connection without a certificate is refused; with one it is served")
    func clientCertificates() async throws {
        let authority = try SimulatorCertificateAuthority()
        try await APNsSimulator.withRunning(try Self.configuration(clientCA: authority)) { simulator in
            let anonymous = try await Self.probe(simulator, port: simulator.legacyPort)
            try? await anonymous.send(Self.frame(id: 1, token: Self.tokenBytes(1)))
            _ = try await anonymous.receiveUntilClosed()
            await anonymous.close()
            #expect(simulator.legacyStats().accepted == 0)

            let issued = try authority.issueClientCertificate(topic: "com.example.app")
            let probe = try await LegacyGatewayProbe.connect(
                port: try #require(simulator.legacyPort),
                trustRootsPEM: simulator.caCertificatePEM,
                clientCertificatePEM: issued.certificatePEM,
                clientPrivateKeyPEM: issued.privateKeyPEM
            )
            try await probe.send(Self.frame(id: 1, token: Self.tokenBytes(1)))
            try await Self.waitFor("accepted") { simulator.legacyStats().accepted == 1 }
            await probe.close()
        }
    }

    @Test(
        "control routes: faults, stats and shutdown over HTTP",
        .enabled(if: executableExists("/usr/bin/curl"), "needs /usr/bin/curl")
    )
    func controlRoutes() async throws {
        var configuration = try Self.configuration()
        configuration.controlPort = 0
        try await APNsSimulator.withRunning(configuration) { simulator in
            let faults = try await ControlAPITests.call(
                simulator,
                "POST",
                "/legacy/faults",
                body: #"{"drop_after": 3}"#
            )
            #expect(faults.status == 200)
            #expect(simulator.legacyFaults == LegacyGatewayFaults(dropAfter: 3))
            #expect(
                try await ControlAPITests.call(simulator, "POST", "/legacy/faults", body: #"{"drop_after": 0}"#).status
                    == 400
            )
            #expect(
                try await ControlAPITests.call(simulator, "POST", "/legacy/faults", body: #"{"later": 1}"#).status
                    == 400
            )
            #expect(
                try await ControlAPITests.call(simulator, "POST", "/legacy/faults", body: #"{"drop_after": null}"#)
                    .status == 200
            )
            #expect(simulator.legacyFaults == LegacyGatewayFaults())
            #expect(try await ControlAPITests.call(simulator, "DELETE", "/legacy/stats").status == 405)

            let probe = try await Self.probe(simulator, port: simulator.legacyPort)
            try await probe.send(Self.frame(id: 5, token: Self.tokenBytes(1)))
            try await Self.waitFor("accepted") { simulator.legacyStats().accepted == 1 }
            let stats = try await ControlAPITests.call(simulator, "GET", "/legacy/stats")
            #expect((stats.json as? [String: Any])?["accepted"] as? Int == 1)
            #expect(try await ControlAPITests.call(simulator, "POST", "/legacy/shutdown").status == 200)
            #expect(try await probe.receiveUntilClosed() == [8, 10] + Self.be32(5))
            await probe.close()
        }
    }
}
