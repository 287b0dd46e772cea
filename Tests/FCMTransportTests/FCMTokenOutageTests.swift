import FCMSimulator
import Foundation
import PushgateCore
import Testing

@testable import FCMTransport

/// Outages of the token endpoint delay sends, never fail them; only a definitive refusal is an alarm, and
/// even then the messages are completed as held. The real client (AsyncHTTPClient to the token endpoint,
/// HTTP/2 to `messages:send`) against the simulator's token-endpoint faults.
@Suite("FCM client: token endpoint outages and refusals", .timeLimit(.minutes(2)))
struct FCMTokenOutageTests {
    /// Short back-offs, so that the tests wait a fraction of a second between fetches.
    static func quickBackoff(_ configuration: inout FCMClient.Configuration) {
        configuration.tokenFetchBackoff = FCMTokenFetchBackoff.Configuration(
            outage: Backoff(base: .milliseconds(100), multiplier: 2, cap: .milliseconds(400)),
            refusal: Backoff(base: .milliseconds(200), multiplier: 2, cap: .milliseconds(400))
        )
        configuration.tokenExchangeTimeout = .milliseconds(500)
    }

    /// Sends `message` to the devices numbered `devices`, all at once.
    static func sendAll(_ client: FCMClient, _ message: FCMMessage, to devices: Range<Int>) async -> [FCMOutcome] {
        await withTaskGroup(of: FCMOutcome.self, returning: [FCMOutcome].self) { group in
            for index in devices {
                group.addTask { await client.send(message, to: registrationToken(index)) }
            }
            var outcomes: [FCMOutcome] = []
            for await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
    }

    /// Waits until the simulator's token endpoint has answered `count` token requests with a fault.
    static func waitForFaultAnswers(_ simulator: RunningFCMSimulator, atLeast count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while simulator.stats().tokenFaultAnswers < count {
            guard ContinuousClock.now < deadline else { throw CancellationError() }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    @Test(
        "503, a dropped connection, an answer slower than the timeout: each only delays the send, which is accepted once",
        arguments: [
            FCMTokenEndpointFaults(status: 503),
            FCMTokenEndpointFaults(dropConnections: true),
            FCMTokenEndpointFaults(latencyMilliseconds: 1_000),
        ]
    )
    func outageDelays(faults: FCMTokenEndpointFaults) async throws {
        try await FCMSimulator.withRunning { simulator in
            try await withFCMClient(simulator, tweak: Self.quickBackoff) { client in
                simulator.setTokenEndpointFaults(faults)
                let message = try notificationMessage()
                async let sent = client.send(message, to: registrationToken(1))
                if faults.latencyMilliseconds == 0 {
                    // Two fetches failed: the send waited through the first back-off, and waits still.
                    try await Self.waitForFaultAnswers(simulator, atLeast: 2)
                } else {
                    let deadline = ContinuousClock.now + .seconds(60)
                    while simulator.stats().tokenRequests < 1, ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(10))
                    }
                }
                #expect(client.credentialAlarm == nil, "an outage is not an alarm")
                simulator.clearTokenEndpointFaults()
                let outcome = await sent
                #expect(outcome.isAccepted, "\(outcome)")
                // (A slow answer may come after the client gave up on it, or before: either way it only delays.)
                if faults.latencyMilliseconds == 0 {
                    #expect(client.accessTokenFetches >= 3, "the failed fetches were tried again")
                    #expect(simulator.stats().accessTokensIssued == 1)
                }
                #expect(client.credentialAlarm == nil)
                #expect(simulator.messages(token: registrationToken(1)).count == 1)
            }
        }
    }

    @Test("access tokens revoked while the token endpoint answers 503: the refused sends wait for a new token")
    func revokedDuringOutage() async throws {
        try await FCMSimulator.withRunning { simulator in
            try await withFCMClient(simulator, tweak: Self.quickBackoff) { client in
                let first = await client.send(try notificationMessage(), to: registrationToken(1))
                #expect(first.isAccepted)
                simulator.setTokenEndpointFaults(FCMTokenEndpointFaults(status: 503, revokeAccessTokens: true))
                let message = try notificationMessage()
                async let outcomes = Self.sendAll(client, message, to: 2..<12)
                try await Self.waitForFaultAnswers(simulator, atLeast: 2)
                simulator.clearTokenEndpointFaults()
                let notAccepted = await outcomes.filter { !$0.isAccepted }
                #expect(notAccepted.isEmpty, "\(notAccepted)")
                #expect(simulator.stats().devices == 11)
                #expect(simulator.stats().duplicates == 0)
                #expect(simulator.stats().rejected >= 1, "sends with the revoked token were refused")
            }
        }
    }

    @Test(
        "invalid_grant: sends complete at once as held until the next fetch, the alarm names it; once accepted again it clears"
    )
    func refusalHoldsAndClears() async throws {
        try await FCMSimulator.withRunning { simulator in
            try await withFCMClient(simulator, tweak: Self.quickBackoff) { client in
                simulator.setTokenEndpointFaults(FCMTokenEndpointFaults(oauthError: "invalid_grant"))
                // The first send waits for the first fetch, which is refused: held, not failed, never sent.
                let held = await client.send(try notificationMessage(), to: registrationToken(1))
                #expect(held.credentialsRefused, "\(held)")
                #expect(held.isConfigurationAlarm && held.outcomeClass == .retryable && !held.invalidatesDevice)
                #expect(held.reasonLabel == "fcm_credentials_refused")
                #expect(held.retryAfter.map { $0 <= .milliseconds(400) } == true)
                let alarm = try #require(client.credentialAlarm)
                #expect(alarm.contains("invalid_grant"), "\(alarm)")
                #expect(simulator.stats().sends == 0)

                simulator.clearTokenEndpointFaults()
                var outcome = held
                for _ in 0..<100 where !outcome.isAccepted {
                    // Held outcomes come at once until the next fetch is due (within 400 ms).
                    try await Task.sleep(for: .milliseconds(50))
                    outcome = await client.send(try notificationMessage(), to: registrationToken(1))
                }
                #expect(outcome.isAccepted, "\(outcome)")
                #expect(client.credentialAlarm == nil)
                #expect(simulator.messages(token: registrationToken(1)).count == 1)
            }
        }
    }
}
