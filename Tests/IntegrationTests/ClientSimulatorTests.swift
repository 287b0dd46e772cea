import APNsHTTP2
import APNsSimulator
import APNsTransport
import Foundation
import NIOCore
import PushTransport
import PushgateCore
import Testing

/// The client against the simulator over real TLS and HTTP/2 on loopback.
@Suite("APNs client against the simulator", .timeLimit(.minutes(3)))
struct ClientSimulatorTests {
    @Test(
        "delivers with either authentication scheme, with every header APNs documents",
        arguments: TestAuthentication.allCases
    )
    func delivers(authentication: TestAuthentication) async throws {
        try await SimulatorFixture.with(authentication) { simulator, client, _ in
            let notification = try SimulatorFixture.content(
                collapseID: "score",
                expiration: .at(epochSeconds: 4_000_000_000)
            )
            let outcomes = await SimulatorFixture.sendToMany(client, notification, count: 50)
            #expect(outcomes.count == 50)
            for (index, outcome) in outcomes {
                #expect(outcome.outcomeClass == .accepted, "device \(index): \(outcome)")
                #expect(outcome.status == 200)
                #expect(outcome.apnsID != nil)
            }
            let recorded = simulator.notifications(device: SimulatorFixture.token(7).hex)
            #expect(recorded.count == 1)
            let headers = recorded.first?.headers ?? [:]
            #expect(headers["apns-topic"] == SimulatorFixture.topic)
            #expect(headers["apns-push-type"] == "alert")
            #expect(headers["apns-priority"] == "10")
            #expect(headers["apns-expiration"] == "4000000000")
            #expect(headers["apns-collapse-id"] == "score")
            #expect(recorded.first?.payloadString == #"{"aps":{"alert":"hello"}}"#)
            #expect(simulator.stats().duplicates == 0)
        }
    }

    @Test("an apns-id we choose is the one APNs records and echoes")
    func chosenAPNsID() async throws {
        try await SimulatorFixture.with(.token) { simulator, client, _ in
            let id = try APNsID("7d3b5c1e-2f4a-4b6c-8d9e-0a1b2c3d4e5f")
            let outcome = await client.send(try SimulatorFixture.content(), to: SimulatorFixture.token(1), apnsID: id)
            #expect(outcome.apnsID == id.value)
            #expect(simulator.notifications(device: SimulatorFixture.token(1).hex).first?.apnsID == id.value)
        }
    }

    @Test("push types get their topic suffix and background goes out at priority 5")
    func pushTypesAndTopics() async throws {
        try await SimulatorFixture.with(.token) { simulator, client, _ in
            let voip = try SimulatorFixture.content(pushType: .voip, payload: #"{"caller":"x"}"#)
            let background = try SimulatorFixture.content(
                pushType: .background,
                priority: .conservePower,
                payload: #"{"aps":{"content-available":1}}"#
            )
            #expect(await client.send(voip, to: SimulatorFixture.token(1)).isAccepted)
            #expect(await client.send(background, to: SimulatorFixture.token(2)).isAccepted)
            #expect(
                simulator.notifications(device: SimulatorFixture.token(1).hex).first?.topic
                    == "com.example.pushgate.voip"
            )
            let recorded = simulator.notifications(device: SimulatorFixture.token(2).hex).first
            #expect(recorded?.headers["apns-priority"] == "5")
            #expect(recorded?.pushType == "background")
        }
    }

    @Test("410 Unregistered comes back rejected with the time APNs gave", arguments: TestAuthentication.allCases)
    func unregisteredCarriesTimestamp(authentication: TestAuthentication) async throws {
        try await SimulatorFixture.with(authentication) { simulator, client, _ in
            let when = Date(timeIntervalSince1970: 1_790_000_000.250)
            simulator.markUnregistered(SimulatorFixture.token(3).hex, at: when)
            let outcome = await client.send(try SimulatorFixture.content(), to: SimulatorFixture.token(3))
            #expect(outcome.status == 410)
            #expect(outcome.reason == .unregistered)
            #expect(outcome.outcomeClass == .rejected)
            #expect(outcome.invalidatedAtMilliseconds == 1_790_000_000_250)
        }
    }

    @Test("every outcome class: rejected, retryable and accepted side by side")
    func outcomeClasses() async throws {
        try await SimulatorFixture.with(.certificate) { simulator, client, _ in
            simulator.markBad(SimulatorFixture.token(1).hex)
            let bad = await client.send(try SimulatorFixture.content(), to: SimulatorFixture.token(1))
            #expect(bad.status == 400)
            #expect(bad.reason == .badDeviceToken)
            #expect(bad.outcomeClass == .rejected)

            for (rate, status, reason) in [
                (\SimulatorFaults.rate429, 429, APNsReason.tooManyRequests), (\.rate500, 500, .internalServerError),
                (\.rate503, 503, .serviceUnavailable),
            ] {
                try simulator.setFaults(
                    {
                        var faults = SimulatorFaults()
                        faults[keyPath: rate] = 1
                        return faults
                    }()
                )
                let outcome = await client.send(try SimulatorFixture.content(), to: SimulatorFixture.token(2))
                #expect(outcome.status == status)
                #expect(outcome.reason == reason)
                #expect(outcome.outcomeClass == .retryable, "\(outcome)")
            }
            try simulator.setFaults(.none)
            #expect(await client.send(try SimulatorFixture.content(), to: SimulatorFixture.token(2)).isAccepted)
        }
    }

    @Test("a topic the certificate does not allow is rejected by APNs, not retried")
    func topicDisallowed() async throws {
        try await SimulatorFixture.with(.certificate) { _, client, _ in
            let other = PreparedNotification(
                try NotificationContent(
                    topic: Topic("com.other.app"),
                    pushType: .alert,
                    priority: .immediate,
                    payload: .alert("x")
                )
            )
            let outcome = await client.send(other, to: SimulatorFixture.token(1))
            #expect(outcome.status == 400)
            #expect(outcome.outcomeClass == .rejected)
        }
    }

    @Test("ExpiredProviderToken: the client mints a new token once and the resend is accepted")
    func expiredProviderTokenIsRefreshed() async throws {
        let simulatorClock = ManualSimulatorClock(start: Date(timeIntervalSince1970: 1_800_000_000))
        let clientClock = ManualWallClock(Date(timeIntervalSince1970: 1_800_000_000))
        try await SimulatorFixture.with(.token, simulator: { $0.clock = simulatorClock }, clientClock: clientClock) {
            simulator,
            client,
            manager in
            #expect(await client.send(try SimulatorFixture.content(), to: SimulatorFixture.token(1)).isAccepted)
            #expect(manager?.tokensMinted == 1)
            // APNs' clock runs an hour ahead of ours: our 30-minute-old token is over an hour old to it.
            clientClock.advance(by: 30 * 60)
            simulatorClock.advance(by: 61 * 60)
            let outcome = await client.send(try SimulatorFixture.content(), to: SimulatorFixture.token(2))
            #expect(outcome.isAccepted, "\(outcome)")
            #expect(manager?.tokensMinted == 2, "exactly one new token")
            #expect(simulator.stats().rejectedByReason["ExpiredProviderToken"] == 1)
        }
    }

    @Test("a token that is still expired after the one resend is handed back, not resent forever")
    func expiredProviderTokenRetriedOnlyOnce() async throws {
        let simulatorClock = ManualSimulatorClock(start: Date(timeIntervalSince1970: 1_800_000_000))
        let clientClock = ManualWallClock(Date(timeIntervalSince1970: 1_800_000_000 - 2 * 3600))
        try await SimulatorFixture.with(.token, simulator: { $0.clock = simulatorClock }, clientClock: clientClock) {
            simulator,
            client,
            _ in
            let outcome = await client.send(try SimulatorFixture.content(), to: SimulatorFixture.token(1))
            #expect(outcome.reason == .expiredProviderToken)
            #expect(outcome.status == 403)
            #expect(simulator.stats().rejectedByReason["ExpiredProviderToken"] == 2, "the original and one resend")
        }
    }

    @Test(
        "GOAWAY mid-flight: nothing lost, nothing APNs answered is sent twice",
        arguments: TestAuthentication.allCases
    )
    func goAwayMidFlight(authentication: TestAuthentication) async throws {
        try await SimulatorFixture.with(
            authentication,
            simulator: {
                $0.faults.goAwayAfterStreams = 40
                $0.faults.latencyMilliseconds = 5
            },
            client: { $0.maximumConnections = 2 }
        ) { simulator, client, _ in
            let outcomes = await SimulatorFixture.sendToMany(client, try SimulatorFixture.content(), count: 120)
            let notAccepted = outcomes.filter { !$0.value.isAccepted }
            #expect(notAccepted.isEmpty, "\(notAccepted.prefix(3))")
            let stats = simulator.stats()
            #expect(stats.goAwaysSent >= 2)
            #expect(stats.accepted == 120)
            #expect(stats.duplicates == 0)
            for index in 0..<120 {
                #expect(simulator.deliveries(device: SimulatorFixture.token(index).hex).accepted == 1)
            }
        }
    }

    @Test("SETTINGS_MAX_CONCURRENT_STREAMS lowered to 1 mid-flight is honoured")
    func maxConcurrentStreamsLowered() async throws {
        try await SimulatorFixture.with(
            .token,
            simulator: { $0.faults.latencyMilliseconds = 20 },
            client: { $0.maximumConnections = 1 }
        ) {
            simulator,
            client,
            _ in
            let notification = try SimulatorFixture.content()
            async let burst = SimulatorFixture.sendToMany(client, notification, count: 60)
            // Wait until the burst is in flight, then lower the limit under it.
            while simulator.stats().received < 5 { try await Task.sleep(for: .milliseconds(2)) }
            try simulator.updateFaults { $0.maxConcurrentStreams = 1 }
            let outcomes = await burst
            let failures = outcomes.values.filter { !$0.isAccepted }
            #expect(failures.isEmpty, "\(failures.prefix(3))")
            // The burst is answered, so nothing is open. A stream beyond the announced limit never reaches
            // the simulator's stream count (its HTTP/2 layer refuses it first, so the peak stays at 1 either
            // way); the simulator then closes the connection. So a client that opens a second stream loses
            // the connection and the answers with it: the 20 requests must all be answered, on the same
            // connection, each reaching the simulator once.
            simulator.resetPeakStreams()
            let before = simulator.stats()
            let moreOutcomes = await SimulatorFixture.sendToMany(client, notification, count: 20, offset: 100)
            let notAccepted = moreOutcomes.values.filter { !$0.isAccepted }
            #expect(notAccepted.isEmpty, "\(notAccepted.prefix(3))")
            let after = simulator.stats()
            #expect(after.connectionsOpened == before.connectionsOpened, "the client had to reconnect")
            #expect(after.received == before.received + 20)
            #expect(after.peakStreams == 1, "the simulator counted \(after.peakStreams) streams open at once")
            #expect(after.duplicates == 0)
        }
    }

    @Test("a dropped connection: every request gets an outcome, and the client reconnects")
    func droppedConnection() async throws {
        try await SimulatorFixture.with(
            .certificate,
            simulator: {
                $0.faults.dropAfterStreams = 10
                $0.faults.latencyMilliseconds = 5
            }
        ) { simulator, client, _ in
            let outcomes = await SimulatorFixture.sendToMany(client, try SimulatorFixture.content(), count: 60)
            #expect(outcomes.count == 60, "no request is left without an outcome")
            for outcome in outcomes.values where !outcome.isAccepted {
                #expect(outcome.outcomeClass == .retryable, "\(outcome)")
                #expect(outcome.transportFailure == .connectionLost, "\(outcome)")
            }
            let unanswered = outcomes.filter { !$0.value.isAccepted }
            #expect(unanswered.count > 0, "the fault should have cut some streams")
            // The unanswered ones go through once the network behaves, on a new connection.
            try simulator.setFaults(.none)
            for (index, _) in unanswered {
                #expect(await client.send(try SimulatorFixture.content(), to: SimulatorFixture.token(index)).isAccepted)
            }
            #expect(simulator.stats().connectionsOpened >= 2)
            // APNs may have processed a request whose answer the drop swallowed: resending it can
            // duplicate, but only within what was unanswered.
            #expect(simulator.stats().duplicates <= unanswered.count)
            for index in 0..<60 {
                #expect(simulator.deliveries(device: SimulatorFixture.token(index).hex).accepted >= 1)
            }
        }
    }

    @Test("a server that never answers: the deadline fires and the stream is freed")
    func deadlineFreesTheStream() async throws {
        try await SimulatorFixture.with(
            .token,
            simulator: {
                $0.maxConcurrentStreams = 1
                $0.faults.blackhole = true
            },
            client: {
                $0.requestTimeout = .milliseconds(300)
                $0.maximumConnections = 1
            }
        ) { simulator, client, _ in
            let outcome = await client.send(try SimulatorFixture.content(), to: SimulatorFixture.token(1))
            // Written, then no answer: APNs may have taken it (the dispatcher does not resend it).
            #expect(outcome.transportFailure == .answerTimeout)
            #expect(outcome.transportFailure?.mayHaveReachedService == true)
            #expect(outcome.outcomeClass == .retryable)
            #expect(client.statistics.inFlight == 0)
            // With one stream allowed, the next request can only go out if the first one was freed.
            try simulator.setFaults(.none)
            let next = await client.send(try SimulatorFixture.content(), to: SimulatorFixture.token(2))
            #expect(next.isAccepted, "\(next)")
            #expect(simulator.stats().connectionsOpened == 1, "same connection")
        }
    }

    @Test("cancelling a waiting send abandons it promptly")
    func cancellation() async throws {
        try await SimulatorFixture.with(.token, simulator: { $0.faults.blackhole = true }) { simulator, client, _ in
            let task = Task { await client.send(try SimulatorFixture.content(), to: SimulatorFixture.token(1)) }
            while simulator.stats().received < 1 { try await Task.sleep(for: .milliseconds(2)) }
            task.cancel()
            let outcome = try await task.value
            #expect(outcome.transportFailure == .cancelled)
        }
    }

    @Test("a send whose task is already cancelled is abandoned at once, not at its deadline")
    func cancelledBeforeSubmission() async throws {
        try await SimulatorFixture.with(
            .token,
            simulator: { $0.faults.blackhole = true },
            client: { $0.requestTimeout = .seconds(60) }
        ) {
            _,
            client,
            _ in
            let notification = try SimulatorFixture.content()
            let task = Task {
                // Cancelled before `send` runs: the id is not known when the cancellation arrives.
                withUnsafeCurrentTask { $0?.cancel() }
                return await client.send(notification, to: SimulatorFixture.token(1))
            }
            let outcome = await task.value
            #expect(outcome.transportFailure == .cancelled, "\(outcome)")
        }
    }

    @Test("the default topic of a certificate is its subject UID, as in Apple's push certificates")
    func certificateTopic() throws {
        let directory = try TemporaryDirectory()
        let authority = try SimulatorCertificateAuthority()
        let issued = try authority.issueClientCertificate(topic: "com.example.fromcert")
        try issued.write(certificateTo: directory.path("c.pem"), privateKeyTo: directory.path("c.key"))
        let certificate = try APNsClient.ClientCertificate.load(
            certificatePath: directory.path("c.pem"),
            keyPath: directory.path("c.key")
        )
        #expect(certificate.subjectUID == "com.example.fromcert")
        // A combined PEM (certificate and key in one file) loads too.
        let combined = issued.certificatePEM + issued.privateKeyPEM
        try combined.write(toFile: directory.path("combined.pem"), atomically: true, encoding: .utf8)
        #expect(
            try APNsClient.ClientCertificate.load(certificatePath: directory.path("combined.pem"), keyPath: nil)
                .subjectUID == "com.example.fromcert"
        )
    }

    @Test("submit delivers outcomes to one receiver without a task per request")
    func submitToReceiver() async throws {
        try await SimulatorFixture.with(.token) { simulator, client, _ in
            let receiver = CollectingReceiver(expected: 500)
            let notification = try SimulatorFixture.content()
            client.submit(
                (0..<500).map {
                    APNsRequest(
                        notification: notification,
                        deviceToken: SimulatorFixture.token($0),
                        tag: UInt64($0),
                        receiver: receiver
                    )
                }
            )
            let outcomes = await receiver.all()
            #expect(outcomes.count == 500)
            let tags = Set(outcomes.map(\.tag))
            #expect(tags == Set((0..<500).map { UInt64($0) }))
            #expect(outcomes.allSatisfy { $0.outcome.isAccepted })
            #expect(simulator.stats().accepted == 500)
        }
    }
}

/// Collects outcomes and lets a test await them all.
final class CollectingReceiver: APNsOutcomeReceiver, @unchecked Sendable {
    // @unchecked: all state is guarded by `lock`.
    private let lock = NSLock()
    private var outcomes: [(tag: UInt64, outcome: APNsOutcome)] = []
    private var waiter: CheckedContinuation<[(tag: UInt64, outcome: APNsOutcome)], Never>?
    private let expected: Int

    init(expected: Int) { self.expected = expected }

    func receive(_ outcome: APNsOutcome, for request: APNsRequest) {
        lock.lock()
        outcomes.append((request.tag, outcome))
        let done = outcomes.count == expected ? waiter : nil
        if done != nil { waiter = nil }
        let result = outcomes
        lock.unlock()
        done?.resume(returning: result)
    }

    func all() async -> [(tag: UInt64, outcome: APNsOutcome)] {
        await withCheckedContinuation { continuation in
            lock.lock()
            if outcomes.count == expected {
                let result = outcomes
                lock.unlock()
                continuation.resume(returning: result)
            } else {
                waiter = continuation
                lock.unlock()
            }
        }
    }
}
