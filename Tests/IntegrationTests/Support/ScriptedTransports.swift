import APNsTransport
import FCMTransport
import Foundation
import PushTransport
import PushgateCore
import Synchronization

/// An FCM transport that answers each message at once: with the outcomes scripted for its token, in
/// order, and once those are used up (or none were scripted) with 200 and a message name. It records
/// every message it was given and when, on the injected clock, so that a test reads when a retry went out
/// without timing anything.
final class ScriptedFCMTransport: FCMNotificationTransport {
    struct Sent: Sendable {
        var token: String
        var at: Date
    }

    private struct State {
        var script: [String: [FCMOutcome]] = [:]
        var sent: [Sent] = []
        var nextID: UInt64 = 0
    }
    private let state = Mutex(State())
    private let clock: any WallClock
    let inFlightCapacity: Int

    init(clock: any WallClock = SystemWallClock(), capacity: Int = 1_000) {
        self.clock = clock
        self.inFlightCapacity = capacity
    }

    /// FCM's answer to a failed `messages:send`: Google's error body with `code` in `error.details[]`.
    static func error(
        _ code: FCMErrorCode,
        message: String = "error",
        retryAfter: String? = nil,
        now: Date = Date()
    ) -> FCMOutcome {
        let status = code.status ?? 500
        let body =
            #"{"error":{"code":\#(status),"message":"\#(message)","status":"\#(code.canonicalStatus)","details":["#
            + #"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(code.rawValue)"}]}}"#
        return .answered(status: status, body: Array(body.utf8), retryAfter: retryAfter, now: now)
    }

    /// The next answers to messages for `token`, in order.
    func script(_ token: DeviceToken, _ outcomes: FCMOutcome...) {
        state.withLock { $0.script[token.value, default: []].append(contentsOf: outcomes) }
    }

    func submit(_ requests: [FCMSendRequest]) -> [UInt64] {
        let now = clock.now()
        let (answers, ids) = state.withLock { state -> ([FCMOutcome], [UInt64]) in
            let answers = requests.map { request -> FCMOutcome in
                state.sent.append(Sent(token: request.token, at: now))
                if var scripted = state.script[request.token], !scripted.isEmpty {
                    let outcome = scripted.removeFirst()
                    state.script[request.token] = scripted
                    return outcome
                }
                let name = #"{"name":"projects/test/messages/0:\#(state.sent.count)"}"#
                return .answered(status: 200, body: Array(name.utf8), now: now)
            }
            defer { state.nextID += UInt64(requests.count) }
            return (answers, (0..<UInt64(requests.count)).map { state.nextID + $0 })
        }
        // Outside the lock: receivers may call back in.
        for (request, answer) in zip(requests, answers) { request.receiver.receive(answer, for: request) }
        return ids
    }

    func withdraw(_ ids: some Sequence<UInt64>) -> Int { 0 }

    var sent: [Sent] { state.withLock { $0.sent } }

    /// When messages for `token` were submitted, in order.
    func sendTimes(to token: DeviceToken) -> [Date] {
        state.withLock { state in state.sent.filter { $0.token == token.value }.map(\.at) }
    }
}

/// An APNs transport that accepts every notification at once and records the device tokens it was given.
final class RecordingAPNsTransport: APNsNotificationTransport {
    private let tokens = Mutex<[DeviceToken]>([])
    let inFlightCapacity: Int

    init(capacity: Int = 1_000) {
        self.inFlightCapacity = capacity
    }

    func submit(_ requests: [APNsRequest]) -> [UInt64] {
        let first = tokens.withLock { tokens in
            defer { tokens.append(contentsOf: requests.map(\.deviceToken)) }
            return UInt64(tokens.count)
        }
        for request in requests {
            request.receiver.receive(
                .answered(status: 200, reason: nil, apnsID: nil, apnsUniqueID: nil, invalidatedAtMilliseconds: nil),
                for: request
            )
        }
        return (0..<UInt64(requests.count)).map { first + $0 }
    }

    func withdraw(_ ids: some Sequence<UInt64>) -> Int { 0 }

    var sent: [DeviceToken] { tokens.withLock { $0 } }
}

/// Forwards to a real FCM transport and records when each message was handed to it, on the injected
/// clock: a test reads when a retry went out from these times, not from a sleep.
final class SubmitTimesFCMTransport: FCMNotificationTransport {
    private let base: any FCMNotificationTransport
    private let clock: any WallClock
    private let times = Mutex<[String: [Date]]>([:])

    init(_ base: any FCMNotificationTransport, clock: any WallClock = SystemWallClock()) {
        self.base = base
        self.clock = clock
    }

    func submit(_ requests: [FCMSendRequest]) -> [UInt64] {
        let now = clock.now()
        times.withLock { times in
            for request in requests { times[request.token, default: []].append(now) }
        }
        return base.submit(requests)
    }

    func withdraw(_ ids: some Sequence<UInt64>) -> Int { base.withdraw(ids) }

    var inFlightCapacity: Int { base.inFlightCapacity }

    /// When messages for `token` were handed to the transport, in order.
    func submitTimes(to token: DeviceToken) -> [Date] { times.withLock { $0[token.value] ?? [] } }
}
