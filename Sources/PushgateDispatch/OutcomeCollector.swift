import APNsClient
import PushTransport
import PushgateCore
import Synchronization

/// Receives the outcomes of a batch of sends (on event-loop threads) and hands them to the
/// dispatcher's task in bulk. One collector serves a whole chunk: no per-notification task or closure.
final class OutcomeCollector: APNsOutcomeReceiver {
    struct Completed: Sendable {
        var tag: UInt64
        var token: DeviceToken
        var outcome: APNsOutcome
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
        state.withLock { state in
            state.completed.append(Completed(tag: request.tag, token: request.deviceToken, outcome: outcome))
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
