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
        /// `info.applicationServerKey` decoded once (a message's VAPID key is compared with it).
        var applicationServerKeyBytes: [UInt8]?
        /// 404 or 410 once expired.
        var goneStatus: Int?
        /// Messages answered 201 (since the last reset).
        var delivered = 0
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
        var checking: WebPushSimulatorChecking
        var nextSubscription = 1
        var nextMessage = 1
    }

    let state: Mutex<State>
    let now: @Sendable () -> Date
    let recordLimit: Int
    let decryptsMessages: Bool

    init(configuration: WebPushSimulator.Configuration) {
        state = Mutex(
            State(
                latencyMilliseconds: configuration.latencyMilliseconds,
                checking: WebPushSimulatorChecking(decryptEvery: configuration.decryptEvery)
            )
        )
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
        var applicationServerKeyBytes: [UInt8]?
        if let applicationServerKey {
            guard let bytes = SimulatorBase64URL.decode(applicationServerKey), bytes.count == 65,
                (try? P256.Signing.PublicKey(x963Representation: bytes)) != nil
            else { throw .invalidRequest("applicationServerKey must be base64url of a 65-byte P-256 public key") }
            applicationServerKeyBytes = bytes
        }
        var generator = SystemRandomNumberGenerator()
        let key = Self.freshKey(using: &generator)
        var secret = [UInt8](repeating: 0, count: 16)
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
            state.subscriptions[id] = Subscription(
                info: info,
                key: key,
                authSecret: secret,
                applicationServerKeyBytes: applicationServerKeyBytes
            )
            return info
        }
    }

    /// A uniformly random P-256 scalar (drawn again in the 2^-32 case BoringSSL refuses it): as random as
    /// `P256.KeyAgreement.PrivateKey()`, without the FIPS self-test it runs per key on Linux, which made
    /// 100,000 subscriptions for a benchmark take ten seconds more.
    private static func freshKey(using generator: inout SystemRandomNumberGenerator) -> P256.KeyAgreement.PrivateKey {
        while true {
            let scalar = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: scalar) { return key }
        }
    }

    /// `count` new subscriptions on `originIndex` (as ``createSubscription(originIndex:applicationServerKey:)``
    /// each), as lines of `ENDPOINT P256DH AUTH`: what a benchmark needs to register many browsers.
    func createSubscriptions(
        count: Int,
        originIndex: Int,
        applicationServerKey: String?
    ) throws(WebPushSimulatorError) -> String {
        guard (1...1_000_000).contains(count) else { throw .invalidRequest("count must be 1 to 1000000") }
        var lines = ""
        for _ in 0..<count {
            let made = try createSubscription(originIndex: originIndex, applicationServerKey: applicationServerKey)
            lines += "\(made.endpoint) \(made.p256dh) \(made.auth)\n"
        }
        return lines
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
            for id in state.subscriptions.keys {
                state.subscriptions[id]?.goneStatus = nil
                state.subscriptions[id]?.delivered = 0
            }
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
            if request.onWorkerThread { state.stats.checkedOnWorkers += 1 }
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
