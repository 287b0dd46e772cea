import PushgateCore
import Testing

@Suite("Claim scheduler: round-robin by chunk, urgent first, no starvation, apps take turns")
struct ClaimSchedulerTests {
    /// A ledger in miniature: requests with a number of chunks to cut; each turn asks the scheduler and
    /// cuts one chunk of the request it names, its id the next turn number, as a store does.
    struct Ledger {
        struct Request {
            var name: String
            var seq: Int64
            var app: String
            var urgent: Bool
            var remaining: Int
            var lastTurn: Int64?
        }

        var requests: [Request] = []
        var turn: Int64 = 0
        /// Every chunk cut: its turn and app (what the stores read back as the apps' recent turns).
        var cut: [(turn: Int64, app: String)] = []

        mutating func add(_ name: String, chunks: Int, app: String = "a", urgent: Bool = false) {
            requests.append(
                Request(
                    name: name,
                    seq: Int64(requests.count + 1),
                    app: app,
                    urgent: urgent,
                    remaining: chunks,
                    lastTurn: nil
                )
            )
        }

        /// Cuts `count` chunks (fewer if the work runs out) and names each one's request.
        mutating func run(_ count: Int) -> [String] {
            var order: [String] = []
            for _ in 0..<count {
                // The oldest requests with uncut targets, as many as a store reads.
                let candidates = requests.filter { $0.remaining > 0 }.prefix(ClaimScheduler.candidateLimit).map {
                    ClaimScheduler.Candidate(seq: $0.seq, app: $0.app, urgent: $0.urgent, lastTurn: $0.lastTurn)
                }
                var recent: [String: Int64] = [:]
                for chunk in cut.suffix(Int(ClaimScheduler.recentTurnWindow)) { recent[chunk.app] = chunk.turn }
                guard let seq = ClaimScheduler.next(candidates, recentAppTurns: recent),
                    let index = requests.firstIndex(where: { $0.seq == seq })
                else { break }
                turn += 1
                requests[index].remaining -= 1
                requests[index].lastTurn = turn
                cut.append((turn, requests[index].app))
                order.append(requests[index].name)
            }
            return order
        }
    }

    @Test("no candidate: nothing to cut; one candidate: it")
    func trivial() {
        #expect(ClaimScheduler.next([]) == nil)
        #expect(ClaimScheduler.next([.init(seq: 7, app: "a", urgent: false, lastTurn: 3)]) == 7)
    }

    @Test("a one-chunk request sent during a broadcast is cut at the broadcast's next turn, not after it")
    func oneChunkRequestPassesABroadcast() {
        var ledger = Ledger()
        ledger.add("broadcast", chunks: 50)
        #expect(ledger.run(3) == ["broadcast", "broadcast", "broadcast"])
        ledger.add("single", chunks: 1)
        #expect(ledger.run(2) == ["single", "broadcast"])
    }

    @Test("active requests take one chunk each in turn, the oldest first")
    func interleaving() {
        var ledger = Ledger()
        ledger.add("x", chunks: 3)
        ledger.add("y", chunks: 2)
        ledger.add("z", chunks: 1)
        #expect(ledger.run(10) == ["x", "y", "z", "x", "y", "x"])
    }

    @Test("urgent requests of an app go before its normal ones when both wait for their first chunk")
    func urgentFirst() {
        var ledger = Ledger()
        ledger.add("normal", chunks: 2)
        ledger.add("urgent", chunks: 2, urgent: true)
        #expect(ledger.run(10) == ["urgent", "normal", "urgent", "normal"])
    }

    @Test("a stream of new requests does not starve a broadcast: it waits at most a round of the candidates")
    func noStarvation() {
        var ledger = Ledger()
        ledger.add("broadcast", chunks: 1_000)
        var broadcastTurns: [Int64] = []
        for index in 0..<400 {
            // Two new one-chunk requests arrive for every chunk cut: they outpace the cuts.
            ledger.add("s\(2 * index)", chunks: 1)
            ledger.add("s\(2 * index + 1)", chunks: 1)
            if ledger.run(1) == ["broadcast"] { broadcastTurns.append(ledger.turn) }
        }
        let gaps = zip(broadcastTurns.dropFirst(), broadcastTurns).map { $0 - $1 }
        #expect(broadcastTurns.count >= 5)
        #expect(gaps.allSatisfy { $0 <= Int64(ClaimScheduler.candidateLimit) + 1 }, "gaps \(gaps)")
        #expect(ledger.requests.filter { $0.remaining > 0 }.count > ClaimScheduler.candidateLimit)
    }

    @Test("requests already served are overdue after as many turns as there are candidates")
    func overdueBeatsNew() {
        let candidates: [ClaimScheduler.Candidate] = [
            .init(seq: 1, app: "a", urgent: false, lastTurn: 10),
            .init(seq: 2, app: "a", urgent: true, lastTurn: nil),
        ]
        #expect(ClaimScheduler.next(candidates, recentAppTurns: ["a": 11]) == 2)
        #expect(ClaimScheduler.next(candidates, recentAppTurns: ["a": 12]) == 1)
    }

    @Test("apps take turns: one app's broadcast and burst of requests do not slow another app's")
    func appsTakeTurns() {
        var ledger = Ledger()
        ledger.add("a-big", chunks: 4, app: "a")
        ledger.add("b-big", chunks: 4, app: "b")
        #expect(ledger.run(4) == ["a-big", "b-big", "a-big", "b-big"])
        for index in 1...3 { ledger.add("a\(index)", chunks: 1, app: "a") }
        // App A's new requests take A's turns; B keeps every other chunk.
        #expect(ledger.run(6) == ["a1", "b-big", "a2", "b-big", "a-big", "a3"])
    }

    @Test("an app served recently waits for an app not served in the window, even with no request left uncut")
    func recentTurnsCount() {
        let candidates: [ClaimScheduler.Candidate] = [
            .init(seq: 1, app: "a", urgent: false, lastTurn: nil),
            .init(seq: 2, app: "b", urgent: false, lastTurn: nil),
        ]
        #expect(ClaimScheduler.next(candidates) == 1)
        #expect(ClaimScheduler.next(candidates, recentAppTurns: ["a": 5]) == 2)
        #expect(ClaimScheduler.next(candidates, recentAppTurns: ["a": 5, "b": 6]) == 1)
    }

    /// The rules as first written (a dictionary of each app's candidates, a filtered array per rule):
    /// ``ClaimScheduler/next(_:recentAppTurns:)`` now runs once per chunk cut inside the store's writer
    /// without those allocations, and must choose exactly as this did.
    static func reference(_ candidates: [ClaimScheduler.Candidate], recentAppTurns: [String: Int64]) -> Int64? {
        guard candidates.count > 1 else { return candidates.first?.seq }
        let latest = max(recentAppTurns.values.max() ?? 0, candidates.compactMap(\.lastTurn).max() ?? 0)
        var byApp: [String: [ClaimScheduler.Candidate]] = [:]
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

    @Test("chooses as the rules' first writing did, for 5,000 random candidate sets of one to three apps")
    func matchesReference() {
        var generator = SplitMix64(seed: 23)
        for round in 0..<5_000 {
            let apps = ["a", "b", "c"].prefix(Int.random(in: 1...3, using: &generator))
            let count = Int.random(in: 0...ClaimScheduler.candidateLimit, using: &generator)
            let seqs = (1...Int64(200)).shuffled(using: &generator).prefix(count)
            let candidates = seqs.map { seq in
                ClaimScheduler.Candidate(
                    seq: seq,
                    app: apps.randomElement(using: &generator)!,
                    urgent: Bool.random(using: &generator),
                    lastTurn: Bool.random(using: &generator) ? nil : Int64.random(in: 1...300, using: &generator)
                )
            }
            var recent: [String: Int64] = [:]
            for app in apps where Bool.random(using: &generator) {
                recent[app] = Int64.random(in: 1...300, using: &generator)
            }
            let expected = Self.reference(candidates, recentAppTurns: recent)
            #expect(ClaimScheduler.next(candidates, recentAppTurns: recent) == expected, "round \(round)")
        }
    }
}
