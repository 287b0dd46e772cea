import Crypto
import DequeModule
import Foundation
import Synchronization

/// The simulator's shared state, behind one lock; every route reads and changes it here.
final class WebPushSimulatorCore: Sendable {
    struct Subscription: Sendable {
        var info: WebPushSimulatorSubscription
        var key: P256.KeyAgreement.PrivateKey
        var authSecret: [UInt8]
        /// 404 or 410 once expired.
        var goneStatus: Int?
    }

    struct State: Sendable {
        /// The origins' serialized forms (`https://127.0.0.1:PORT`), set once the listeners are bound.
        var origins: [String] = []
        var subscriptions: [String: Subscription] = [:]
        var scripted: [WebPushScriptedAnswer] = []
        /// Oldest first; at most the record limit (a deque: dropping the oldest is O(1) in a long run).
        var received: Deque<WebPushReceivedMessage> = []
        var droppedRecords = 0
        var stats = WebPushSimulatorStats()
        /// Each origin's connections, by origin index (not forgotten by `reset`).
        var connections: [Int: WebPushSimulatorConnections] = [:]
        var latencyMilliseconds = 0
        var nextSubscription = 1
        var nextMessage = 1
    }

    let state: Mutex<State>
    let now: @Sendable () -> Date
    let recordLimit: Int
    let decryptsMessages: Bool

    init(configuration: WebPushSimulator.Configuration) {
        state = Mutex(State(latencyMilliseconds: configuration.latencyMilliseconds))
        now = configuration.now
        recordLimit = configuration.recordLimit
        decryptsMessages = configuration.decryptsMessages
    }

    var latencyMilliseconds: Int { state.withLock { $0.latencyMilliseconds } }

    /// A new subscription on origin `originIndex`, with a fresh key pair and auth secret, as a browser
    /// makes one in `pushManager.subscribe`.
    func createSubscription(
        originIndex: Int,
        applicationServerKey: String?
    ) throws(WebPushSimulatorError)
        -> WebPushSimulatorSubscription
    {
        if let applicationServerKey {
            guard let bytes = SimulatorBase64URL.decode(applicationServerKey), bytes.count == 65,
                (try? P256.Signing.PublicKey(x963Representation: bytes)) != nil
            else { throw .invalidRequest("applicationServerKey must be base64url of a 65-byte P-256 public key") }
        }
        let key = P256.KeyAgreement.PrivateKey()
        var secret = [UInt8](repeating: 0, count: 16)
        var generator = SystemRandomNumberGenerator()
        for index in secret.indices { secret[index] = generator.next() }
        return try state.withLock { state throws(WebPushSimulatorError) in
            guard state.origins.indices.contains(originIndex) else {
                throw .invalidRequest("origin must be 0 to \(state.origins.count - 1)")
            }
            // An id that looks like a real one: long and random, so endpoints cannot be guessed.
            let id = "s\(state.nextSubscription)-" + SimulatorBase64URL.encode((0..<12).map { _ in generator.next() })
            state.nextSubscription += 1
            let info = WebPushSimulatorSubscription(
                id: id,
                originIndex: originIndex,
                endpoint: "\(state.origins[originIndex])/push/\(id)",
                p256dh: SimulatorBase64URL.encode(key.publicKey.x963Representation),
                auth: SimulatorBase64URL.encode(secret),
                privateKey: SimulatorBase64URL.encode(key.rawRepresentation),
                applicationServerKey: applicationServerKey
            )
            state.subscriptions[id] = Subscription(info: info, key: key, authSecret: secret)
            return info
        }
    }

    func subscription(_ id: String) -> WebPushSimulatorSubscription? {
        state.withLock { $0.subscriptions[id]?.info }
    }

    /// Later messages to `id` are answered `status` (404 or 410): the browser unsubscribed.
    func expire(_ id: String, status: Int) throws(WebPushSimulatorError) {
        guard status == 404 || status == 410 else { throw .invalidRequest("status must be 404 or 410") }
        try state.withLock { state throws(WebPushSimulatorError) in
            guard state.subscriptions[id] != nil else { throw .invalidRequest("no subscription \(id)") }
            state.subscriptions[id]?.goneStatus = status
        }
    }

    func script(_ answer: WebPushScriptedAnswer) throws(WebPushSimulatorError) {
        guard answer.count > 0 else { throw .invalidRequest("count must be at least 1") }
        guard answer.dropsConnection || (200...599).contains(answer.status) else {
            throw .invalidRequest("status must be 200 to 599")
        }
        guard answer.latencyMilliseconds >= 0 else { throw .invalidRequest("latency_ms must be at least 0") }
        state.withLock { $0.scripted.append(answer) }
    }

    func setLatency(milliseconds: Int) { state.withLock { $0.latencyMilliseconds = max(0, milliseconds) } }

    func received(subscriptionID: String?) -> [WebPushReceivedMessage] {
        state.withLock { state in
            guard let subscriptionID else { return Array(state.received) }
            return state.received.filter { $0.subscriptionID == subscriptionID }
        }
    }

    func reset() {
        state.withLock { state in
            state.scripted = []
            state.received = []
            state.droppedRecords = 0
            state.stats = WebPushSimulatorStats()
            for id in state.subscriptions.keys { state.subscriptions[id]?.goneStatus = nil }
        }
    }

    /// Routes a request to a push origin's listener.
    func route(_ request: WebPushSimulatorRequest) -> WebPushSimulatorResponse {
        let response: WebPushSimulatorResponse
        if request.method == "POST", request.path.hasPrefix("/push/") {
            response = push(request, id: String(request.path.dropFirst("/push/".count)))
        } else {
            response = .refusal(404, "no such resource (push resources are POST /push/{id})")
        }
        state.withLock { state in
            state.stats.requests += 1
            if request.httpVersion == 2 { state.stats.http2Requests += 1 } else { state.stats.http1Requests += 1 }
            if response.dropsConnection {
                state.stats.answeredByStatus[0, default: 0] += 1
            } else if response.status == 201 {
                state.stats.delivered += 1
            } else {
                state.stats.answeredByStatus[response.status, default: 0] += 1
            }
        }
        return response
    }
}

/// A control request or configuration the simulator cannot carry out, with the reason.
public struct WebPushSimulatorError: Error, Hashable, Sendable, CustomStringConvertible {
    public let description: String
    static func invalidRequest(_ reason: String) -> Self { Self(description: reason) }
}
