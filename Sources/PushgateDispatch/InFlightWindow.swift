package import Foundation
package import PushgateCore

/// How many broadcast sends may be unanswered at once, as a pure state machine: round trips of
/// answered sends in, a limit out (``budget(capacity:)``), and the room an app's broadcast may take now
/// (``room(for:inFlight:wanting:capacity:)``). The dispatcher keeps one for all apps: the limit holds
/// all apps' broadcast sends together, shared equally between the apps that have sends waiting.
///
/// Together, not each: the loop claims a broadcast's next chunk once the one before is all sent, so with
/// two apps one app's chunk starts while the other's last sends are still unanswered. A limit applied to
/// each app let the new chunk add a whole limit on top of that tail (twoapps, traced: a 7,805 unanswered
/// plus b 10,963 at a limit of 10,963), the round trip jumped (72 ms to 166 ms), the limit fell to a third,
/// and the next tail did it again: the limit swung between 3,400 and 11,000, below what the server
/// answers, and the pair took 8.5-11 % longer than without the window.
///
/// The transports could carry more (connections x streams: 16,000 on a 50 ms path), but a server that
/// cannot answer that many a round trip queues what it cannot yet handle, and every send behind that
/// queue, a one-device request's included, waits for it: with a stand-in answering 52,000 a second,
/// 16,000 unanswered made a 300 ms round trip of a 50 ms one, and a single sent on a connection of its
/// own still waited about 110 ms at the server. Sending more than the server answers does not make it
/// answer faster, so the window keeps the round trip near the lowest one seen (``Configuration``), in
/// the manner of TCP Vegas: every ``Configuration/interval`` with at least
/// ``Configuration/minimumSamples`` answers, a mean round trip above the target shrinks the limit in
/// proportion (at most by half, never below ``Configuration/minimum``); one at or below it grows the
/// limit by half, and the limit is lifted altogether once it reaches the capacity. It starts lifted,
/// so a broadcast on a path without a queue is sent exactly as before.
///
/// The lowest round trip is the lowest of the last ``Configuration/baseWindow`` (two halves: a path
/// that became slower for good is followed within that time), kept for each service: a group of phones
/// and browsers is one broadcast on several paths (APNs, FCM, a Web Push origin) whose round trips differ
/// without any queue, and measured against the fastest one's, the slower path's answers would read as
/// a queue and hold the whole broadcast to the minimum. Each answer is compared with its own service's
/// target; the limit shrinks when the answers, so compared, are late on average. Holds no clock: the
/// times come in.
package struct InFlightWindow: Sendable, Equatable {
    package struct Configuration: Sendable, Equatable {
        /// The queue the window lets a server build above the lowest round trip: the larger of this
        /// and ``allowanceFraction`` of that round trip.
        package var allowance: TimeInterval = 0.025
        package var allowanceFraction = 0.5
        /// How often the limit is decided, at most.
        package var interval: TimeInterval = 0.1
        /// Answers an interval needs before the limit is decided on it.
        package var minimumSamples = 16
        package var baseWindow: TimeInterval = 10
        /// The limit never goes below this.
        package var minimum = 1_000

        package init() {}
    }

    package let configuration: Configuration
    /// Nil: lifted (the capacity).
    package private(set) var limit: Int?
    /// For each service, the lowest round trip of the current half of the base window and of the one before.
    private var lowest: [PushPlatform: Lowest] = [:]
    private var halfStartedAt: Date?
    private var intervalStartedAt: Date?
    /// The interval's answers so far, for each service.
    private var interval: [PushPlatform: Tally] = [:]
    private var intervalCount = 0

    private struct Lowest: Sendable, Equatable {
        var current = TimeInterval.infinity
        var previous = TimeInterval.infinity
    }

    private struct Tally: Sendable, Equatable {
        var sum: TimeInterval = 0
        var count = 0
    }

    package init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// The lowest round trip of `service` in the base window (nil before its first answer).
    package func lowestRoundTrip(of service: PushPlatform = .apns) -> TimeInterval? {
        guard let lowest = lowest[service] else { return nil }
        let value = min(lowest.current, lowest.previous)
        return value.isFinite ? value : nil
    }

    /// The mean round trip of `service` above which its answers count as late.
    package func target(of service: PushPlatform = .apns) -> TimeInterval? {
        lowestRoundTrip(of: service).map { $0 + max(configuration.allowance, $0 * configuration.allowanceFraction) }
    }

    /// The sends that may be unanswered: the limit, or `capacity` if it is lower or the limit is lifted.
    package func budget(capacity: Int) -> Int {
        min(capacity, limit ?? capacity)
    }

    /// How many more broadcast sends `app` may start now. `inFlight`: each app's unanswered broadcast
    /// sends; `wanting`: the apps with sends waiting for room (`app` among them). All apps' sends together
    /// stay within the budget, and while more than one app waits, each has at most an equal share of it
    /// (an app whose last sends are only waiting for answers keeps them, but takes no more). Lifted, the
    /// room is what the transports have left, shared as before the window.
    package func room(for app: String, inFlight: [String: Int], wanting: Set<String>, capacity: Int) -> Int {
        let budget = budget(capacity: capacity)
        let total = inFlight.values.reduce(0, +)
        guard limit != nil else { return max(0, budget - total) }
        let share = budget / max(1, wanting.union([app]).count)
        return max(0, min(budget - total, share - inFlight[app, default: 0]))
    }

    /// A send to `service` was answered `roundTrip` seconds after it was sent, seen at `now`; `capacity`
    /// is what the transports could carry now.
    package mutating func answered(
        roundTrip: TimeInterval,
        service: PushPlatform = .apns,
        now: Date,
        capacity: Int
    ) {
        let roundTrip = max(0, roundTrip)
        if halfStartedAt.map({ now.timeIntervalSince($0) >= configuration.baseWindow / 2 }) ?? true {
            let first = halfStartedAt == nil
            lowest = lowest.mapValues { Lowest(previous: first ? .infinity : $0.current) }
            halfStartedAt = now
        }
        lowest[service, default: Lowest()].current = min(lowest[service]?.current ?? .infinity, roundTrip)
        guard let started = intervalStartedAt else {
            intervalStartedAt = now
            interval = [service: Tally(sum: roundTrip, count: 1)]
            intervalCount = 1
            return
        }
        interval[service, default: Tally()].sum += roundTrip
        interval[service, default: Tally()].count += 1
        intervalCount += 1
        guard now.timeIntervalSince(started) >= configuration.interval,
            intervalCount >= configuration.minimumSamples
        else { return }
        decide(capacity: capacity)
        // The next interval starts with the next answer.
        intervalStartedAt = nil
    }

    /// Each service's mean round trip over its target, weighted by its answers: above 1, the answers were
    /// late on average and the limit shrinks in proportion (for one service: its target over its mean).
    private mutating func decide(capacity: Int) {
        var lateness = 0.0
        var count = 0
        for (service, tally) in interval {
            guard let target = target(of: service), target > 0 else { continue }
            lateness += tally.sum / target
            count += tally.count
        }
        guard count > 0, capacity > 0 else { return }
        let late = lateness / Double(count)
        let current = budget(capacity: capacity)
        let floor = min(configuration.minimum, capacity)
        if late > 1 {
            let factor = max(0.5, 1 / late)
            // Rounded: the lateness is a sum of quotients, 0.75 may come out a hair under.
            limit = max(floor, Int((Double(current) * factor).rounded()))
        } else if let limit {
            let grown = limit + max(limit / 2, 1)
            self.limit = grown >= capacity ? nil : grown
        }
    }
}
