import NIOConcurrencyHelpers
import PushgateCore

/// The cap on connections over every origin of one ``WebPushClient``: the pools' plug-ins ask it before
/// they open a connection (``WebPushPlugin/admitConnection(id:open:)``) and tell it when one is gone. A
/// connection over the cap waits, its pool seeing a slow connect, until another closes (an idle one
/// closes after ``WebPushClient/Configuration/idleTimeout``).
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

    init(maximumConnections: Int) {
        state = NIOLockedValueBox(State(machine: .init(maximum: maximumConnections)))
    }

    /// Connections holding a slot and waiting for one: for tests and statistics.
    var counts: (held: Int, waiting: Int) {
        state.withLockedValue { ($0.machine.heldCount, $0.machine.waitingCount) }
    }

    func admit(_ ticket: Ticket, open: @escaping @Sendable () -> Void) {
        let admitted = state.withLockedValue { state -> Bool in
            switch state.machine.requested(ticket) {
            case .open: return true
            case .wait:
                state.pending[ticket] = open
                return false
            case .refused: return false
            }
        }
        if admitted { open() }
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
