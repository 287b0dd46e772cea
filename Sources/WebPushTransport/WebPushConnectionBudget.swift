import NIOConcurrencyHelpers
import PushgateCore

/// The cap on connections over every origin of one ``WebPushClient``: the pools' plug-ins ask it before
/// they open a connection (``WebPushPlugin/admitConnection(id:open:)``) and tell it when one is gone. A
/// connection over the cap waits, its pool seeing a slow connect, until another closes: one that holds
/// nothing is asked to close at once (``WebPushClient`` retires one of another origin's idle connections).
final class WebPushConnectionBudget: Sendable {
    /// One connection of one origin's pool (connection ids are per pool).
    struct Ticket: Hashable, Sendable {
        var origin: WebPushOrigin
        var connection: Int
    }

    private struct State {
        var machine: WebPushConnectionBudgetStateMachine<Ticket>
        var pending: [Ticket: @Sendable () -> Void] = [:]
    }

    private let state: NIOLockedValueBox<State>
    /// Called (outside the lock) when a connection of `origin` must wait: asks another origin's pool to
    /// close a connection that holds nothing, so that the wait lasts a close rather than an idle timeout.
    private let reclaim: @Sendable (WebPushOrigin) -> Void

    init(maximumConnections: Int, reclaim: @escaping @Sendable (WebPushOrigin) -> Void = { _ in }) {
        state = NIOLockedValueBox(State(machine: .init(maximum: maximumConnections)))
        self.reclaim = reclaim
    }

    /// Connections holding a slot and waiting for one: for tests and statistics.
    var counts: (held: Int, waiting: Int) {
        state.withLockedValue { ($0.machine.heldCount, $0.machine.waitingCount) }
    }

    /// Whether a connection waits for a slot: a pool with nothing queued then gives up an idle connection
    /// (``WebPushPlugin/sampled(queued:inFlight:connections:activeConnections:)``, at each pool tick).
    var hasWaiters: Bool { state.withLockedValue { $0.machine.waitingCount > 0 } }

    func admit(_ ticket: Ticket, open: @escaping @Sendable () -> Void) {
        let admission = state.withLockedValue { state -> WebPushConnectionBudgetStateMachine<Ticket>.Admission in
            let admission = state.machine.requested(ticket)
            if admission == .wait { state.pending[ticket] = open }
            return admission
        }
        switch admission {
        case .open: open()
        case .wait: reclaim(ticket.origin)
        case .refused: break
        }
    }

    func release(_ ticket: Ticket) {
        let next = state.withLockedValue { state -> (@Sendable () -> Void)? in
            state.pending[ticket] = nil
            guard let granted = state.machine.released(ticket) else { return nil }
            return state.pending.removeValue(forKey: granted)
        }
        next?()
    }

    func shutdown() {
        state.withLockedValue { state in
            _ = state.machine.shutdown()
            state.pending.removeAll()
        }
    }
}
