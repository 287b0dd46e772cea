import PushTransport
import PushgateCore
import Synchronization

/// Receives the outcomes of a batch of sends (on event-loop threads), from every service alike (each
/// service's plug-in hands them over as ``PushOutcome``s), and hands them to the dispatcher's task in
/// bulk. One collector serves a whole chunk: no per-notification task or closure. Its in-flight count
/// covers every service, so one budget bounds them together.
///
/// It wakes the dispatcher once per batch of outcomes, not once per outcome: when the outcomes waiting
/// reach an eighth of what was in flight (at most ``maximumWakeBatch``), or when nothing is left in
/// flight. Waking a suspended task costs a thread hand-off; per outcome, at 100,000 answers a second,
/// those hand-offs (and sends of one request at a time) cost more than the rest of the dispatch. A
/// notification to a few devices still wakes it on its last answer, and a trickle of answers below the
/// batch waits at most for the dispatcher's own progress interval.
final class OutcomeCollector: PushOutcomeReceiver {
    struct Completed: Sendable {
        var tag: UInt64
        var token: DeviceToken
        var outcome: PushOutcome
    }

    /// The most outcomes that wait for the dispatcher before it is woken.
    static let maximumWakeBatch = 128

    private struct State {
        var completed: [Completed] = []
        var inFlight = 0
        /// Outcomes that wake the dispatcher; set from the in-flight count when it changes hands.
        var wakeThreshold = 1
        /// The dispatcher was woken since it last drained: it will take everything then.
        var woken = false
        /// How many times the collector woke the dispatcher (for tests).
        var wakes = 0

        mutating func updateWakeThreshold() {
            wakeThreshold = max(1, min(OutcomeCollector.maximumWakeBatch, inFlight / 8))
        }
    }
    private let state = Mutex(State())
    /// Signalled on every outcome. Several collectors may share one, so that one loop waits for all.
    let signal: WakeSignal

    init(signal: WakeSignal = WakeSignal()) {
        self.signal = signal
    }

    func receive(_ outcome: PushOutcome, token: DeviceToken, tag: UInt64) {
        complete(Completed(tag: tag, token: token, outcome: outcome))
    }

    private func complete(_ completed: Completed) {
        let wake = state.withLock { state -> Bool in
            state.completed.append(completed)
            state.inFlight -= 1
            guard !state.woken, state.inFlight == 0 || state.completed.count >= state.wakeThreshold else {
                return false
            }
            state.woken = true
            state.wakes += 1
            return true
        }
        if wake { signal.signal() }
    }

    func willSend(_ count: Int) {
        state.withLock { state in
            state.inFlight += count
            state.updateWakeThreshold()
        }
    }

    /// `count` sends announced by ``willSend(_:)`` that were not handed to any transport after all (their
    /// service set them apart as unsendable): no outcome will come for them. Wakes the dispatcher when
    /// what is left in flight has all been answered.
    func willNotSend(_ count: Int) {
        guard count > 0 else { return }
        let wake = state.withLock { state -> Bool in
            state.inFlight -= count
            state.updateWakeThreshold()
            guard !state.woken, state.inFlight == 0, !state.completed.isEmpty else { return false }
            state.woken = true
            state.wakes += 1
            return true
        }
        if wake { signal.signal() }
    }

    /// Takes what has completed so far.
    func drain() -> [Completed] {
        state.withLock { state in
            defer {
                state.completed.removeAll(keepingCapacity: true)
                state.woken = false
                state.updateWakeThreshold()
            }
            return state.completed
        }
    }

    var inFlight: Int { state.withLock { $0.inFlight } }

    /// How many times the collector has woken the dispatcher.
    var wakes: Int { state.withLock { $0.wakes } }
}
