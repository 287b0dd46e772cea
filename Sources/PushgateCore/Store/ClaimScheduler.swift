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
        // Called once per chunk cut, inside the store's write transaction (the SQLite writer, the serial
        // resource of one-device traffic): one pass per rule and no per-call arrays, and with one app among
        // the candidates (the usual case) rule 1 has nothing to choose.
        let app: String
        let firstApp = candidates[0].app
        if candidates.allSatisfy({ $0.app == firstApp }) {
            app = firstApp
        } else {
            var byApp: [String: (turn: Int64, oldest: Int64)] = [:]
            for candidate in candidates {
                var entry = byApp[candidate.app] ?? (recentAppTurns[candidate.app] ?? -1, .max)
                entry.turn = max(entry.turn, candidate.lastTurn ?? -1)
                entry.oldest = min(entry.oldest, candidate.seq)
                byApp[candidate.app] = entry
            }
            guard let chosen = byApp.min(by: { ($0.value.turn, $0.value.oldest) < ($1.value.turn, $1.value.oldest) })
            else { return nil }
            app = chosen.key
        }
        let latest = max(recentAppTurns.values.max() ?? 0, candidates.compactMap(\.lastTurn).max() ?? 0)
        let overdueAfter = Int64(candidates.count)
        var overdue: (turn: Int64, seq: Int64)?
        var fresh: (rank: Int, seq: Int64)?
        var served: (turn: Int64, seq: Int64)?
        for candidate in candidates where candidate.app == app {
            guard let turn = candidate.lastTurn else {
                let key = (candidate.urgent ? 0 : 1, candidate.seq)
                if fresh.map({ key < $0 }) ?? true { fresh = key }
                continue
            }
            let key = (turn, candidate.seq)
            if latest - turn >= overdueAfter, overdue.map({ key < $0 }) ?? true { overdue = key }
            if served.map({ key < $0 }) ?? true { served = key }
        }
        return overdue?.seq ?? fresh?.seq ?? served?.seq
    }
}
