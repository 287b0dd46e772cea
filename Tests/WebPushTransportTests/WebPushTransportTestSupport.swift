import Foundation
import Logging
import NIOConcurrencyHelpers
import PushTransport
import PushgateCore
import Testing
import WebPush
import WebPushSimulator
import WebPushTransport

/// One simulator, one client trusting its CA (VAPID key made for the test), and the service over it.
struct WebPushFixture {
    let simulator: RunningWebPushSimulator
    let client: WebPushClient
    let service: WebPushPushService
    let key: VAPIDKey

    /// A subscription on origin `originIndex`, made for the fixture's VAPID key (any other is refused 403).
    func subscribe(origin originIndex: Int = 0) throws -> WebPushSimulatorSubscription {
        try simulator.createSubscription(originIndex: originIndex, applicationServerKey: key.publicKeyBase64URL)
    }

    /// Sends one request's message to `subscriptions` through the service, and waits for every outcome
    /// (by position).
    func send(
        _ payload: String = #"{"title":"Goal"}"#,
        to subscriptions: [WebPushSimulatorSubscription],
        expiration: Expiration = .immediately,
        key collapseID: String? = nil
    ) async throws -> [PushOutcome] {
        let tokens = try subscriptions.map { try WebPushSubscription(jsonBytes: Array($0.json.utf8)).deviceToken }
        return try await send(payload, toTokens: tokens, expiration: expiration, key: collapseID)
    }

    func send(
        _ payload: String,
        toTokens tokens: [DeviceToken],
        expiration: Expiration = .immediately,
        key collapseID: String? = nil
    ) async throws -> [PushOutcome] {
        let request = NotificationRequest(
            id: try RequestID("r-\(UUID().uuidString.prefix(8))"),
            devices: tokens,
            expiration: expiration,
            collapseID: try collapseID.map { try CollapseID($0) },
            payload: try Payload(jsonString: payload),
            createdAt: Date()
        )
        let prepared = try service.prepare(request, logger: Logger(label: "test"))
        let collector = OutcomeCollector(expecting: tokens.count)
        let sends = tokens.enumerated().map { PushSend(token: $0.element, tag: UInt64($0.offset)) }
        let submission = prepared.submit(sends, sentAt: Date(), to: collector)
        for unsendable in submission.unsendable {
            collector.receive(
                PushOutcome(
                    service: .webpush,
                    verdict: .failed,
                    outcomeClass: .rejected,
                    status: nil,
                    reason: unsendable.reason,
                    metricsReason: unsendable.reason
                ),
                token: unsendable.send.token,
                tag: unsendable.send.tag
            )
        }
        let outcomes = await collector.all()
        return (0..<tokens.count).map { outcomes[UInt64($0)]! }
    }
}

/// Runs `body` with a simulator (`configure` changes its configuration) and a client on it.
func withWebPush<Result: Sendable>(
    simulator configureSimulator: (inout WebPushSimulator.Configuration) -> Void = { _ in },
    client configureClient: (inout WebPushClient.Configuration) -> Void = { _ in },
    _ body: (WebPushFixture) async throws -> Result
) async throws -> Result {
    var simulatorConfiguration = WebPushSimulator.Configuration()
    configureSimulator(&simulatorConfiguration)
    return try await WebPushSimulator.withRunning(simulatorConfiguration) { simulator in
        let key = VAPIDKey.generate()
        var configuration = WebPushClient.Configuration(
            vapidKey: key,
            subject: try VAPIDSubject("mailto:ops@example.com"),
            trustRoots: .caFile(simulator.caCertificatePath)
        )
        configuration.eventLoopThreads = 2
        configuration.requestTimeout = .seconds(20)
        configureClient(&configuration)
        return try await WebPushClient.withClient(configuration: configuration) { client in
            try await body(
                WebPushFixture(
                    simulator: simulator,
                    client: client,
                    service: WebPushPushService(transport: client),
                    key: key
                )
            )
        }
    }
}

/// Collects the outcome of each send by tag, and hands them over once all have come.
final class OutcomeCollector: PushOutcomeReceiver, Sendable {
    private struct State {
        var outcomes: [UInt64: PushOutcome] = [:]
        var waiter: CheckedContinuation<[UInt64: PushOutcome], Never>?
    }
    private let expected: Int
    private let state = NIOLockedValueBox(State())

    init(expecting expected: Int) {
        self.expected = expected
    }

    func receive(_ outcome: PushOutcome, token: DeviceToken, tag: UInt64) {
        let done = state.withLockedValue {
            state -> (CheckedContinuation<[UInt64: PushOutcome], Never>, [UInt64: PushOutcome])? in
            precondition(state.outcomes[tag] == nil, "two outcomes for one send")
            state.outcomes[tag] = outcome
            guard state.outcomes.count == expected, let waiter = state.waiter else { return nil }
            state.waiter = nil
            return (waiter, state.outcomes)
        }
        if let (waiter, outcomes) = done { waiter.resume(returning: outcomes) }
    }

    func all() async -> [UInt64: PushOutcome] {
        await withCheckedContinuation { continuation in
            let ready = state.withLockedValue { state -> [UInt64: PushOutcome]? in
                if state.outcomes.count == expected { return state.outcomes }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// Waits for a condition the simulator or the client's connections make true (a connection closing on
/// its idle timer): polls, because the condition lives on other threads. Fails after `timeout`.
func eventually(
    _ what: Comment,
    timeout: Duration = .seconds(30),
    _ condition: () -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("timed out waiting for: \(what)")
}
