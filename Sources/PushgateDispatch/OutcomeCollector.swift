import APNsHTTP2
import FCMTransport
import PushTransport
import PushgateCore
import Synchronization

/// Receives the outcomes of a batch of sends (on event-loop threads), from APNs and FCM alike, and
/// hands them to the dispatcher's task in bulk. One collector serves a whole chunk: no per-notification
/// task or closure. Its in-flight count covers both services, so one budget bounds them together.
final class OutcomeCollector: APNsOutcomeReceiver, FCMOutcomeReceiver {
    struct Completed: Sendable {
        var tag: UInt64
        var token: DeviceToken
        var outcome: DeliveryOutcome
    }

    private struct State {
        var completed: [Completed] = []
        var inFlight = 0
    }
    private let state = Mutex(State())
    /// Signalled on every outcome. Several collectors may share one, so that one loop waits for all.
    let signal: WakeSignal

    init(signal: WakeSignal = WakeSignal()) {
        self.signal = signal
    }

    func receive(_ outcome: APNsOutcome, for request: APNsRequest) {
        complete(Completed(tag: request.tag, token: request.deviceToken, outcome: .apns(outcome)))
    }

    func receive(_ outcome: FCMOutcome, for request: FCMSendRequest) {
        let token: DeviceToken
        do {
            token = try DeviceToken(fcm: request.token)
        } catch {
            // The transport hands back the string it was given, which came from a valid DeviceToken.
            preconditionFailure("FCM transport answered for a token it was not given")
        }
        complete(Completed(tag: request.tag, token: token, outcome: .fcm(outcome)))
    }

    private func complete(_ completed: Completed) {
        state.withLock { state in
            state.completed.append(completed)
            state.inFlight -= 1
        }
        signal.signal()
    }

    func willSend(_ count: Int) {
        state.withLock { $0.inFlight += count }
    }

    /// Takes what has completed so far.
    func drain() -> [Completed] {
        state.withLock { state in
            defer { state.completed.removeAll(keepingCapacity: true) }
            return state.completed
        }
    }

    var inFlight: Int { state.withLock { $0.inFlight } }
}
