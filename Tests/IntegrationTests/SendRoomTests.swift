import PushgateDispatch
import Testing

/// ``SendRoom``: how a loop turn shares the in-flight budget among the chunks under way.
@Suite("Send room: the in-flight budget shared among chunks and apps")
struct SendRoomTests {
    @Test("small chunks are offered room first, then the others, each in the loop's order")
    func smallFirst() {
        #expect(SendRoom.order(small: [false, true, false, true]) == [1, 3, 0, 2])
        #expect(SendRoom.order(small: [false, false]) == [0, 1])
        #expect(SendRoom.order(small: []) == [])
    }

    @Test("a broadcast filling its app's capacity leaves the reserve to a single, which gets a stream at once")
    func reserveForSingles() {
        // One app, 16 connections x 1,000 streams; the broadcast's chunk has all but the reserve in flight.
        let reserve = 16_000 / SendRoom.reserveDivisor
        var rooms = SendRoom(
            budget: 16_000,
            capacities: ["news": 16_000],
            inFlight: [("news", 16_000 - reserve - 10), ("news", 0)]
        )
        #expect(rooms.room(app: "news", small: false) == 10)
        rooms.spent(10, app: "news")
        #expect(rooms.room(app: "news", small: false) == 0)
        #expect(rooms.room(app: "news", small: true) == reserve)
        rooms.spent(1, app: "news")
        #expect(rooms.room(app: "news", small: true) == reserve - 1)
        #expect(rooms.room(app: "news", small: false) == 0)
    }

    @Test("a throttled app with its capacity queued does not take another app's room")
    func appsWithinTheirTransports() {
        // App a's pool is throttled: everything it may have in flight waits in its own queue.
        let rooms = SendRoom(
            budget: 32_000,
            capacities: ["a": 16_000, "b": 16_000],
            inFlight: [("a", 16_000), ("b", 0)]
        )
        #expect(rooms.room(app: "a", small: true) == 0)
        #expect(rooms.room(app: "a", small: false) == 0)
        #expect(rooms.room(app: "b", small: false) == 16_000 - 16_000 / SendRoom.reserveDivisor)
        #expect(rooms.room(app: "b", small: true) == 16_000)
    }

    @Test("the whole budget still bounds every app, retries included")
    func budgetBoundsAll() {
        // A configured cap (maximumInFlight) below the transports' capacity, and retries in flight.
        var rooms = SendRoom(
            budget: 100,
            capacities: ["a": 16_000, "b": 16_000],
            inFlight: [("a", 30)],
            otherInFlight: 20
        )
        #expect(rooms.room(app: "b", small: true) == 50)
        rooms.spent(50, app: "b")
        #expect(rooms.room(app: "a", small: true) == 0)
        // Under the divisor there is no reserve: a budget of 100 is all the broadcast's.
        let small = SendRoom(budget: 100, capacities: ["a": 100], inFlight: [])
        #expect(small.room(app: "a", small: false) == 100)
    }

    @Test("an app without a capacity (not configured) is bounded by the budget alone")
    func unknownApp() {
        let rooms = SendRoom(budget: 10, capacities: ["a": 5], inFlight: [("gone", 4)])
        #expect(rooms.room(app: "gone", small: false) == 6)
        #expect(rooms.room(app: "a", small: false) == 5)
    }
}
