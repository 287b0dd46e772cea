import FCMSimulator
import Foundation
import NIOCore
import NIOPosix
import PushTransport
import PushgateCore
import Synchronization
import Testing

@testable import FCMTransport

/// Gathers outcomes and hands them over once `expected` have arrived.
final class OutcomeCollector: FCMOutcomeReceiver {
    typealias Outcomes = [(token: String, outcome: FCMOutcome)]
    private struct State {
        var outcomes: Outcomes = []
        var waiter: CheckedContinuation<Outcomes, Never>?
        var expected = Int.max
    }
    private let state = Mutex(State())

    func receive(_ outcome: FCMOutcome, for request: FCMSendRequest) {
        let done = state.withLock { state -> (CheckedContinuation<Outcomes, Never>, Outcomes)? in
            state.outcomes.append((request.token, outcome))
            guard state.outcomes.count >= state.expected, let waiter = state.waiter else { return nil }
            state.waiter = nil
            return (waiter, state.outcomes)
        }
        if let (waiter, outcomes) = done { waiter.resume(returning: outcomes) }
    }

    /// How many outcomes have arrived so far.
    var count: Int { state.withLock { $0.outcomes.count } }

    func wait(for expected: Int) async -> [(token: String, outcome: FCMOutcome)] {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> [(token: String, outcome: FCMOutcome)]? in
                if state.outcomes.count >= expected { return state.outcomes }
                state.expected = expected
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// A registration token as FCM hands them out: ~160 URL-safe characters.
func registrationToken(_ index: Int) -> String {
    "fcm-\(index)-" + String(repeating: "AbC_dEf-12", count: 16)
}

func notificationMessage(_ text: String = "hello") throws -> FCMMessage {
    try FCMMessage(
        payload: try Payload(jsonString: #"{"aps":{"alert":"\#(text)"},"n":1}"#),
        pushType: .alert,
        priority: .immediate,
        expiration: .immediately,
        collapseID: nil,
        createdAt: Date(timeIntervalSince1970: 0)
    )
}

/// A client for a fresh service account of the simulator, trusting only the simulator's CA.
func withFCMClient<Result: Sendable>(
    _ simulator: RunningFCMSimulator,
    tweak: (inout FCMClient.Configuration) -> Void = { _ in },
    _ body: (FCMClient) async throws -> Result
) async throws -> Result {
    let material = try simulator.makeServiceAccount(projectID: "demo-project")
    var configuration = FCMClient.Configuration(
        serviceAccount: try FCMServiceAccount(jsonBytes: material.jsonBytes),
        host: simulator.host,
        port: simulator.port,
        trustRoots: .caFile(simulator.caCertificatePath)
    )
    configuration.eventLoopThreads = 1
    tweak(&configuration)
    return try await FCMClient.withClient(configuration: configuration, body)
}

@Suite("FCM client against the simulator (real TLS, real HTTP/2)")
struct FCMClientTests {
    @Test("one message is accepted; the simulator recorded it, addressed to the token, with the body we derived")
    func oneMessage() async throws {
        try await FCMSimulator.withRunning { simulator in
            try await withFCMClient(simulator) { client in
                let message = try notificationMessage()
                let token = registrationToken(1)
                let outcome = await client.send(message, to: token)
                #expect(outcome.isAccepted)
                #expect(outcome.status == 200)
                let recorded = simulator.messages(token: token)
                #expect(recorded.count == 1)
                #expect(outcome.messageName == recorded.first?.name)
                let sent = try JSONSerialization.jsonObject(with: Data(message.requestBody(token: token)))
                let expected = (sent as? [String: Any])?["message"] as? NSDictionary
                // `#require`, not `!`: a message that never arrived fails this test, not the whole test process.
                let first = try #require(recorded.first)
                let received = try JSONSerialization.jsonObject(with: Data(first.messageJSON.utf8))
                #expect(expected != nil && expected == received as? NSDictionary)
                #expect(client.accessTokensObtained == 1)
            }
        }
    }

    @Test("2,000 messages over pooled connections: the server's stream limit is honoured, each delivered once")
    func twoThousandMessages() async throws {
        var simulatorConfiguration = FCMSimulator.Configuration()
        simulatorConfiguration.maximumConcurrentStreams = 10
        try await FCMSimulator.withRunning(simulatorConfiguration) { simulator in
            try await withFCMClient(
                simulator,
                tweak: {
                    $0.maxConnections = 4
                    // A stream the server refused would fail at once instead of being resent quietly.
                    $0.maximumUnprocessedAttempts = 0
                    // 2,000 queued behind 40 streams: on a busy host the last ones wait longer than the
                    // default 30 s in the queue (issue #27). Time is not what this test checks.
                    $0.requestTimeout = .seconds(600)
                }
            ) { client in
                let message = try notificationMessage()
                let collector = OutcomeCollector()
                let tokens = (0..<2000).map(registrationToken)
                client.submit(tokens.map { FCMSendRequest(message: message, token: $0, receiver: collector) })
                let outcomes = await collector.wait(for: tokens.count)
                #expect(outcomes.count == 2000)
                #expect(outcomes.allSatisfy { $0.outcome.isAccepted })
                #expect(Set(outcomes.map(\.token)) == Set(tokens))
                #expect(simulator.stats().sends == 2000)
                #expect(Set(simulator.messages().compactMap(\.token)) == Set(tokens))
                // Four connections of ten streams, as the server's SETTINGS said.
                #expect(client.inFlightCapacity == 40)
                #expect(client.statistics.connections > 1)
                #expect(client.accessTokensObtained == 1)
            }
        }
    }

    @Test("a token the control API unregistered: 404 UNREGISTERED, the device is to be invalidated")
    func unregistered() async throws {
        try await FCMSimulator.withRunning { simulator in
            try await withFCMClient(simulator) { client in
                let token = registrationToken(2)
                simulator.markUnregistered(token)
                let outcome = await client.send(try notificationMessage(), to: token)
                #expect(outcome.status == 404)
                #expect(outcome.errorCode == .unregistered)
                #expect(outcome.invalidatesDevice)
                #expect(outcome.outcomeClass == .rejected)
                #expect(simulator.messages(token: token).isEmpty)
            }
        }
    }

    @Test("QUOTA_EXCEEDED with Retry-After: 2 is retryable and carries the delay")
    func quotaExceeded() async throws {
        try await FCMSimulator.withRunning { simulator in
            try await withFCMClient(simulator) { client in
                simulator.inject(FCMInjectedError(errorCode: "QUOTA_EXCEEDED", count: 1, retryAfterSeconds: 2))
                let outcome = await client.send(try notificationMessage(), to: registrationToken(3))
                #expect(outcome.status == 429)
                #expect(outcome.outcomeClass == .retryable)
                #expect(outcome.retryAfter == .seconds(2))
                #expect(!outcome.invalidatesDevice)
            }
        }
    }

    @Test("an access token that expired at FCM is refreshed once and the message delivered")
    func expiredAccessToken() async throws {
        try await FCMSimulator.withRunning { simulator in
            try await withFCMClient(simulator) { client in
                #expect(await client.send(try notificationMessage(), to: registrationToken(4)).isAccepted)
                simulator.expireAccessTokens()
                let outcome = await client.send(try notificationMessage("again"), to: registrationToken(5))
                #expect(outcome.isAccepted)
                // Tokens obtained, not fetch attempts: a fetch that timed out on a loaded machine is tried
                // again, and the simulator may have issued the token the client gave up on.
                #expect(client.accessTokensObtained == 2)
                #expect(simulator.messages(token: registrationToken(5)).count == 1)
            }
        }
    }

    @Test("refused again with a fresh token: a configuration alarm, never a dead device, after one refresh")
    func refusedTwice() async throws {
        try await FCMSimulator.withRunning { simulator in
            try await withFCMClient(simulator) { client in
                simulator.refuseAccessTokens()
                let outcome = await client.send(try notificationMessage(), to: registrationToken(6))
                #expect(outcome.status == 401)
                #expect(outcome.accessTokenRejected)
                #expect(outcome.isConfigurationAlarm)
                #expect(!outcome.invalidatesDevice)
                // One refresh: two tokens obtained (a fetch that timed out under load is retried, so attempts
                // may be more) and two sends, the second with the fresh token.
                #expect(client.accessTokensObtained == 2)
                #expect(simulator.stats().sends == 2)
            }
        }
    }

    @Test("withdraw takes back what no connection has written; each gets a cancelled outcome")
    func withdraw() async throws {
        // A server that accepts TCP and never speaks TLS: no connection becomes usable, all stays queued.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let silent = try await ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(silent.localAddress?.port)
        try await FCMSimulator.withRunning { simulator in
            try await withFCMClient(
                simulator,
                tweak: {
                    $0.port = port
                    $0.connectTimeout = .seconds(60)
                }
            ) { client in
                let collector = OutcomeCollector()
                let message = try notificationMessage()
                let ids = client.submit(
                    (0..<5).map { FCMSendRequest(message: message, token: registrationToken($0), receiver: collector) }
                )
                #expect(client.withdraw(ids.prefix(3)) == 3)
                let outcomes = await collector.wait(for: 3)
                #expect(outcomes.map(\.outcome.transportFailure) == Array(repeating: .cancelled, count: 3))
                #expect(Set(outcomes.map(\.token)) == Set((0..<3).map(registrationToken)))
                #expect(client.withdraw(ids) == 2)
                #expect(simulator.stats().sends == 0)
            }
        }
        try await silent.close()
        try await group.shutdownGracefully()
    }
}
