/// How one turn of the dispatch loop shares the in-flight budget out among the chunks under way: a pure
/// decision, made again every turn from what is in flight.
///
/// Rules:
/// 1. **Each app within its own transports.** An app may have in flight at most what its services'
///    transports carry (apps never share a connection). Without this, a throttled app (a per-connection
///    rate, a 429 storm holding its connections) or one with fewer connections open would fill the
///    shared budget with sends queued in its own pool, and another app's chunks would get no room.
/// 2. **Small chunks first.** Chunks whose targets all came in their first page (one-device requests)
///    are offered room before the chunks of broadcasts, so a single never waits behind a broadcast's
///    buffered page for the room its answers free.
/// 3. **A reserve for them.** A large chunk leaves the last ``reserveDivisor``th of its app's capacity
///    free (62 of APNs's 16 x 1,000 streams): while a broadcast fills everything else, a single finds a
///    free stream at once instead of waiting for the broadcast's next answer. Capacities under
///    ``reserveDivisor`` keep no reserve.
package struct SendRoom: Sendable, Equatable {
    /// The large chunks' reserve: capacity / this.
    package static let reserveDivisor = 256

    private var total: Int
    private var apps: [String: Int]
    private var reserves: [String: Int]

    /// - Parameters:
    ///   - budget: the dispatcher's whole in-flight budget (``Dispatcher/inFlightBudget``).
    ///   - capacities: what each app's transports carry together.
    ///   - inFlight: the chunks under way, each with its app and its sends unanswered.
    ///   - otherInFlight: unanswered sends outside these chunks (retries), counted against the budget.
    package init(budget: Int, capacities: [String: Int], inFlight: [(app: String, count: Int)], otherInFlight: Int = 0)
    {
        var used: [String: Int] = [:]
        var all = otherInFlight
        for (app, count) in inFlight {
            used[app, default: 0] += count
            all += count
        }
        total = budget - all
        apps = [:]
        reserves = [:]
        for (app, capacity) in capacities {
            apps[app] = capacity - (used[app] ?? 0)
            reserves[app] = min(capacity, budget) / Self.reserveDivisor
        }
    }

    /// The order in which the chunks (their ``ChunkDelivery/fitsOnePage``, in the loop's order) are
    /// offered room: the small ones first, then the others, each in the loop's order.
    package static func order(small: [Bool]) -> [Int] {
        small.indices.filter { small[$0] } + small.indices.filter { !small[$0] }
    }

    /// What a chunk of `app` may send now: within the whole budget and its app's transports, less the
    /// reserve unless it is `small`. An app without a capacity here (not configured) is bounded by the
    /// budget alone.
    package func room(app: String, small: Bool) -> Int {
        var room = total
        if let left = apps[app] { room = min(room, left - (small ? 0 : reserves[app] ?? 0)) }
        return max(0, room)
    }

    /// A chunk of `app` sent `count`.
    package mutating func spent(_ count: Int, app: String) {
        total -= count
        if apps[app] != nil { apps[app]! -= count }
    }
}
