import DequeModule

/// The decisions of the cap on connections over every origin's pool (``WebPushClient/Configuration/maximumConnections``):
/// each pool asks for a slot before it opens a connection; one is granted while fewer than `maximum` are
/// held, else the request waits, first come first served, for a slot another connection frees.
///
/// A pool keeps its own cap per origin; this one only counts. It holds no channel and no lock: the
/// budget around it (``WebPushConnectionBudget``) carries out its grants.
struct WebPushConnectionBudgetStateMachine<Ticket: Hashable & Sendable>: Sendable {
    enum Admission: Hashable, Sendable {
        /// Open it now: it holds a slot.
        case open
        /// Wait: every slot is held. It is granted later by ``released(_:)``.
        case wait
        /// Refused: the budget is shut down.
        case refused
    }

    let maximum: Int
    private var held: Set<Ticket> = []
    private var waiting: Deque<Ticket> = []
    private var isShutDown = false

    init(maximum: Int) {
        precondition(maximum >= 1)
        self.maximum = maximum
    }

    var heldCount: Int { held.count }
    var waitingCount: Int { waiting.count }

    /// A pool wants to open the connection `ticket`.
    mutating func requested(_ ticket: Ticket) -> Admission {
        guard !isShutDown else { return .refused }
        if held.contains(ticket) { return .open }
        if held.count < maximum, waiting.isEmpty {
            held.insert(ticket)
            return .open
        }
        if !waiting.contains(ticket) { waiting.append(ticket) }
        return .wait
    }

    /// The connection `ticket` is gone (closed, failed), or no longer wanted while it waited. Returns the
    /// waiting connection that takes its slot, if any: open it now.
    mutating func released(_ ticket: Ticket) -> Ticket? {
        if let index = waiting.firstIndex(of: ticket) {
            waiting.remove(at: index)
            return nil
        }
        guard held.remove(ticket) != nil, !isShutDown, let next = waiting.popFirst() else { return nil }
        held.insert(next)
        return next
    }

    /// Stop granting: the waiting requests are dropped (their pools are shutting down and open nothing).
    mutating func shutdown() -> [Ticket] {
        isShutDown = true
        defer { waiting.removeAll() }
        return Array(waiting)
    }
}
