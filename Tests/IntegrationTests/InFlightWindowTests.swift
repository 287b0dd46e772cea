import Foundation
import PushgateCore
import PushgateDispatch
import Testing

/// Transcripts of the in-flight window: round trips in, the limit on a broadcast's unanswered sends out.
/// Round trips are multiples of 1/64 s, so the arithmetic is exact.
@Suite("In-flight window as a state machine")
struct InFlightWindowTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    static let capacity = 16_000

    /// One interval of `count` answers of `roundTrip` seconds, from `start` seconds after t0: all but the
    /// last within 90 ms, the last 150 ms after the first (so the interval is over with it, and only then).
    static func interval(
        _ window: inout InFlightWindow,
        roundTrip: TimeInterval,
        at start: TimeInterval,
        count: Int = 20,
        capacity: Int = capacity
    ) {
        for index in 0..<count {
            let offset = index == count - 1 ? 0.15 : 0.09 * Double(index) / Double(count)
            window.answered(roundTrip: roundTrip, now: t0.addingTimeInterval(start + offset), capacity: capacity)
        }
    }

    @Test("it starts lifted, and answers at the lowest round trip leave it lifted")
    func liftedWhileTheRoundTripHolds() {
        var window = InFlightWindow()
        #expect(window.budget(capacity: Self.capacity) == Self.capacity)
        for index in 0..<5 { Self.interval(&window, roundTrip: 0.0625, at: 0.2 * Double(index)) }
        #expect(window.limit == nil)
        #expect(window.lowestRoundTrip() == 0.0625)
        // 62.5 ms + the larger of 25 ms and half of 62.5 ms.
        #expect(window.target() == 0.09375)
        #expect(window.budget(capacity: Self.capacity) == Self.capacity)
    }

    @Test("a round trip above the target shrinks the limit in proportion, at most by half an interval")
    func queueShrinksTheLimit() {
        var window = InFlightWindow()
        Self.interval(&window, roundTrip: 0.0625, at: 0)
        #expect(window.limit == nil)
        // The server queues: 125 ms round trips against a target of 93.75 ms: 16,000 x 0.75.
        Self.interval(&window, roundTrip: 0.125, at: 0.2)
        #expect(window.limit == 12_000)
        // 500 ms: at most halved.
        Self.interval(&window, roundTrip: 0.5, at: 0.4)
        #expect(window.limit == 6_000)
        #expect(window.budget(capacity: Self.capacity) == 6_000)
        // A lower capacity (connections closed) bounds the budget all the same.
        #expect(window.budget(capacity: 4_000) == 4_000)
    }

    @Test("never below the minimum, nor above the capacity; lifted again once it grows to the capacity")
    func boundsAndRecovery() {
        var window = InFlightWindow()
        Self.interval(&window, roundTrip: 0.0625, at: 0)
        for index in 1...10 { Self.interval(&window, roundTrip: 1, at: 0.2 * Double(index)) }
        #expect(window.limit == 1_000)
        // The queue drained: the limit grows by half an interval, and is lifted at the capacity.
        var limits: [Int?] = []
        for index in 11...18 {
            Self.interval(&window, roundTrip: 0.0625, at: 0.2 * Double(index))
            limits.append(window.limit)
        }
        #expect(limits == [1_500, 2_250, 3_375, 5_062, 7_593, 11_389, nil, nil])
        // A capacity below the minimum is the floor.
        var small = InFlightWindow()
        Self.interval(&small, roundTrip: 0.0625, at: 0, capacity: 10)
        Self.interval(&small, roundTrip: 1, at: 0.2, capacity: 10)
        #expect(small.limit == 10)
        #expect(small.budget(capacity: 10) == 10)
    }

    @Test("an interval decides nothing with fewer answers than the minimum, or before it is over")
    func tooFewAnswers() {
        var window = InFlightWindow()
        Self.interval(&window, roundTrip: 0.0625, at: 0)
        // 15 slow answers: too few.
        Self.interval(&window, roundTrip: 0.5, at: 0.2, count: 15)
        #expect(window.limit == nil)
        // 100 slow answers within 50 ms: the interval is not over until 100 ms after its first answer.
        var fresh = InFlightWindow()
        Self.interval(&fresh, roundTrip: 0.0625, at: 0)
        for index in 0..<100 {
            let at = Self.t0.addingTimeInterval(0.2 + 0.05 * Double(index) / 100)
            fresh.answered(roundTrip: 0.5, now: at, capacity: Self.capacity)
        }
        #expect(fresh.limit == nil)
        // One more answer 100 ms after the first: decided on all 101.
        fresh.answered(roundTrip: 0.5, now: Self.t0.addingTimeInterval(0.31), capacity: Self.capacity)
        #expect(fresh.limit == 8_000)
    }

    @Test("the lowest round trip is the lowest of the last ten seconds: a path slower for good is followed")
    func lowestRoundTripFollowsThePath() {
        var window = InFlightWindow()
        Self.interval(&window, roundTrip: 0.0625, at: 0)
        #expect(window.lowestRoundTrip() == 0.0625)
        // From 5.5 s on the path is 125 ms: the lowest stays 62.5 ms while 0-5 s is the previous half.
        Self.interval(&window, roundTrip: 0.125, at: 5.5)
        #expect(window.lowestRoundTrip() == 0.0625)
        #expect(window.limit == 12_000)
        // Once both halves have passed, only 125 ms remains (target 187.5 ms), and 125 ms answers grow the
        // limit the change left back towards lifted.
        Self.interval(&window, roundTrip: 0.125, at: 11)
        #expect(window.lowestRoundTrip() == 0.125)
        #expect(window.target() == 0.1875)
        #expect(window.limit == nil)
    }

    @Test("round trips of zero (a local stand-in) allow an absolute queue of 25 ms")
    func absoluteAllowance() {
        var window = InFlightWindow()
        Self.interval(&window, roundTrip: 0, at: 0)
        #expect(window.target() == 0.025)
        Self.interval(&window, roundTrip: 0.015625, at: 0.2)
        #expect(window.limit == nil)
        Self.interval(&window, roundTrip: 0.05, at: 0.4)
        #expect(window.limit == 8_000)
    }

    @Test(
        "two apps' broadcasts share one limit: a chunk starting beside another app's unanswered tail gets what it leaves"
    )
    func appsShareTheLimit() {
        var window = InFlightWindow()
        Self.interval(&window, roundTrip: 0.0625, at: 0)
        Self.interval(&window, roundTrip: 0.125, at: 0.2)
        #expect(window.limit == 12_000)
        // twoapps: a's chunk is all sent, 8,000 of it unanswered, when b's next chunk starts. A limit for each
        // app would let b add 12,000 (20,000 in flight at a limit of 12,000: the round trip jumps, the limit
        // falls, and the next chunk's start does it again).
        #expect(window.room(for: "b", inFlight: ["a": 8_000], wanting: ["b"], capacity: Self.capacity) == 4_000)
        // As a's answers come, b takes their room.
        #expect(
            window.room(for: "b", inFlight: ["a": 2_000, "b": 4_000], wanting: ["b"], capacity: Self.capacity)
                == 6_000
        )
        // Both with sends waiting: an equal share each, all together within the limit.
        let inFlight = ["a": 0, "b": 10_000]
        #expect(window.room(for: "a", inFlight: inFlight, wanting: ["a", "b"], capacity: Self.capacity) == 2_000)
        #expect(window.room(for: "b", inFlight: inFlight, wanting: ["a", "b"], capacity: Self.capacity) == 0)
        #expect(
            window.room(for: "a", inFlight: ["a": 0, "b": 4_000], wanting: ["a", "b"], capacity: Self.capacity)
                == 6_000
        )
        // Lifted, the room is what the transports have left, whoever waits (as without the window).
        let lifted = InFlightWindow()
        #expect(
            lifted.room(for: "a", inFlight: ["a": 0, "b": 10_000], wanting: ["a", "b"], capacity: Self.capacity)
                == 6_000
        )
    }

    @Test("a service with a long round trip keeps the transports' whole room: its own round trip is its lowest")
    func longRoundTripIsNotStarved() {
        var window = InFlightWindow()
        // A Firebase-like path at 375 ms, its answers spread between 375 and 531 ms (within the target of
        // 375 ms + 187.5 ms): never held.
        for index in 0..<40 {
            let roundTrip = 0.375 + 0.15625 * Double(index % 5) / 4
            Self.interval(&window, roundTrip: roundTrip, at: 0.2 * Double(index))
        }
        #expect(window.lowestRoundTrip() == 0.375)
        #expect(window.target() == 0.5625)
        #expect(window.limit == nil)
        #expect(window.room(for: "a", inFlight: ["a": 1_000], wanting: ["a"], capacity: Self.capacity) == 15_000)
        // Queueing there shrinks it, never below the minimum: 1,000 a round trip still go.
        for index in 40..<60 { Self.interval(&window, roundTrip: 4, at: 0.2 * Double(index)) }
        #expect(window.limit == 1_000)
        #expect(window.room(for: "a", inFlight: [:], wanting: ["a"], capacity: Self.capacity) == 1_000)
    }

    /// One interval as ``interval(_:roundTrip:at:count:capacity:)``, its answers alternating between APNs
    /// (even) and FCM (odd).
    static func mixedInterval(
        _ window: inout InFlightWindow,
        apns: TimeInterval,
        fcm: TimeInterval,
        at start: TimeInterval
    ) {
        let count = 20
        for index in 0..<count {
            let offset = index == count - 1 ? 0.15 : 0.09 * Double(index) / Double(count)
            window.answered(
                roundTrip: index.isMultiple(of: 2) ? apns : fcm,
                service: index.isMultiple(of: 2) ? .apns : .fcm,
                now: t0.addingTimeInterval(start + offset),
                capacity: capacity
            )
        }
    }

    @Test(
        "one broadcast to phones on two services: each answer is compared with its own service's lowest round trip"
    )
    func servicesAreMeasuredApart() {
        var window = InFlightWindow()
        // APNs at 62.5 ms and FCM at 187.5 ms, neither queueing. Against APNs's lowest alone (target 93.75 ms)
        // the mean of 125 ms would read as a queue and hold the broadcast down; each against its own
        // (93.75 and 281.25 ms), both answer early.
        for index in 0..<10 { Self.mixedInterval(&window, apns: 0.0625, fcm: 0.1875, at: 0.2 * Double(index)) }
        #expect(window.lowestRoundTrip(of: .apns) == 0.0625)
        #expect(window.lowestRoundTrip(of: .fcm) == 0.1875)
        #expect(window.target(of: .fcm) == 0.28125)
        #expect(window.limit == nil)
        // FCM queueing, at twice its target: the answers are late on average ((2/3 + 2) / 2 = 4/3), the limit
        // shrinks to three quarters.
        Self.mixedInterval(&window, apns: 0.0625, fcm: 0.5625, at: 2)
        #expect(window.limit == 12_000)
        // Both back at their lowest: it grows again.
        Self.mixedInterval(&window, apns: 0.0625, fcm: 0.1875, at: 2.2)
        #expect(window.limit == 16_000 || window.limit == nil)
    }
}
