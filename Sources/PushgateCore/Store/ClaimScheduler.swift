/// Which request's next chunk is cut: a weighted round-robin over the requests with uncut targets, by
/// chunk, instead of the oldest request first (which kept a one-device request sent during a broadcast
/// waiting for every remaining chunk of the broadcast).
///
/// A pure decision: the stores read the ``Candidate``s and the apps' recent turns in the claim's
/// transaction, ask ``next(_:recentAppTurns:)`` which request to cut, and cut it. A "turn" is the id of
/// a chunk cut: chunk ids only grow, so the id of a request's newest chunk says when it last had a
/// turn, and every instance sharing a store (PostgreSQL) reads, and so follows, the same order.
///
/// Rules, in order:
/// 1. **Apps take turns.** The app whose last turn is the oldest (never served: first) goes next, so one
///    app's broadcast, or its flood of small requests, takes at most every other chunk from another
///    app. Ties: the app with the oldest request.
/// 2. **Nobody starves.** Within the app, a request already served that has waited at least as many
///    turns (of any app) as there are candidates is overdue, and goes first, the longest waiting first.
/// 3. **New requests go before the remaining chunks of older ones.** A request never served goes before
///    requests already served (which is what lets a request of one chunk pass a broadcast); among them,
///    `urgent` (priority 10) before the others, then the oldest.
/// 4. Otherwise the request served least recently (round-robin by chunk), then the oldest.
public enum ClaimScheduler {
    /// A request with uncut targets.
    public struct Candidate: Sendable, Equatable {
        /// The request's order of arrival (its row's `seq`).
        public var seq: Int64
        public var app: String
        public var urgent: Bool
        /// The id of the request's newest chunk; nil before its first chunk.
        public var lastTurn: Int64?

        public init(seq: Int64, app: String, urgent: Bool, lastTurn: Int64?) {
            self.seq = seq
            self.app = app
            self.urgent = urgent
            self.lastTurn = lastTurn
        }

        public init(seq: Int64, app: String, priority: Int, lastTurn: Int64?) {
            self.init(seq: seq, app: app, urgent: priority >= 10, lastTurn: lastTurn)
        }
    }

    /// Candidates read per claim, the oldest first: a bound on the claim's cost when many requests wait
    /// to be cut. A request beyond it waits until an older one is cut through (a request of one chunk is,
    /// at its first turn).
    public static let candidateLimit = 64

    /// Chunks looked back at to learn the apps' recent turns (``next(_:recentAppTurns:)``).
    public static let recentTurnWindow: Int64 = 256

    /// The `seq` of the request whose next chunk to cut; nil when there is no candidate.
    ///
    /// `recentAppTurns`: the newest chunk id of each app among the most recently cut chunks (of any
    /// request, cut through or not), so that an app whose small requests are cut through at their first
    /// turn still counts as served. Apps not in it were served longer ago.
    public static func next(_ candidates: [Candidate], recentAppTurns: [String: Int64] = [:]) -> Int64? {
        guard candidates.count > 1 else { return candidates.first?.seq }
        let latest = max(recentAppTurns.values.max() ?? 0, candidates.compactMap(\.lastTurn).max() ?? 0)

        var byApp: [String: [Candidate]] = [:]
        for candidate in candidates { byApp[candidate.app, default: []].append(candidate) }
        func appTurn(_ app: String) -> Int64 {
            max(recentAppTurns[app] ?? -1, byApp[app]?.compactMap(\.lastTurn).max() ?? -1)
        }
        func oldest(_ app: String) -> Int64 { byApp[app]?.map(\.seq).min() ?? .max }
        guard
            let app = byApp.keys.min(by: { (appTurn($0), oldest($0)) < (appTurn($1), oldest($1)) }),
            let requests = byApp[app]
        else { return nil }

        let overdueAfter = Int64(candidates.count)
        let overdue = requests.filter { $0.lastTurn.map { latest - $0 >= overdueAfter } ?? false }
        if let first = overdue.min(by: { ($0.lastTurn ?? 0, $0.seq) < ($1.lastTurn ?? 0, $1.seq) }) {
            return first.seq
        }
        let fresh = requests.filter { $0.lastTurn == nil }
        if let first = fresh.min(by: { ($0.urgent ? 0 : 1, $0.seq) < ($1.urgent ? 0 : 1, $1.seq) }) {
            return first.seq
        }
        return requests.min(by: { ($0.lastTurn ?? 0, $0.seq) < ($1.lastTurn ?? 0, $1.seq) })?.seq
    }
}
