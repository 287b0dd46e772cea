import Testing

@testable import WebPushTransport

@Suite("Web Push: the cap on connections over every origin (state machine transcripts)")
struct WebPushConnectionBudgetStateMachineTests {
    @Test("connections open while slots are free; beyond the cap they wait, first come first served")
    func waitsBeyondTheCap() {
        var budget = WebPushConnectionBudgetStateMachine<String>(maximum: 2)
        #expect(budget.requested("a0") == .open)
        #expect(budget.requested("b0") == .open)
        #expect(budget.requested("c0") == .wait)
        #expect(budget.requested("a1") == .wait)
        #expect(budget.heldCount == 2 && budget.waitingCount == 2)
        // b0 closes: its slot goes to the oldest waiter, c0, not to a1.
        #expect(budget.released("b0") == "c0")
        #expect(budget.released("a0") == "a1")
        #expect(budget.released("c0") == nil)
        #expect(budget.heldCount == 1 && budget.waitingCount == 0)
    }

    @Test("a new request does not overtake one that waits, even when a slot is free for an instant")
    func noOvertaking() {
        var budget = WebPushConnectionBudgetStateMachine<String>(maximum: 1)
        #expect(budget.requested("a") == .open)
        #expect(budget.requested("b") == .wait)
        // A waiter withdrawn (its pool gave up) frees nothing and is not granted later.
        #expect(budget.released("b") == nil)
        #expect(budget.requested("c") == .wait)
        #expect(budget.released("a") == "c")
        #expect(budget.heldCount == 1)
    }

    @Test("releasing a connection twice, or one never admitted, changes nothing")
    func idempotentRelease() {
        var budget = WebPushConnectionBudgetStateMachine<String>(maximum: 1)
        #expect(budget.requested("a") == .open)
        #expect(budget.requested("b") == .wait)
        #expect(budget.released("a") == "b")
        #expect(budget.released("a") == nil)
        #expect(budget.released("zz") == nil)
        #expect(budget.heldCount == 1 && budget.waitingCount == 0)
        // Asking again for a held connection keeps its slot.
        #expect(budget.requested("b") == .open)
        #expect(budget.heldCount == 1)
    }

    @Test("after shutdown nothing is granted: waiters are dropped, new requests refused")
    func shutdown() {
        var budget = WebPushConnectionBudgetStateMachine<String>(maximum: 1)
        #expect(budget.requested("a") == .open)
        #expect(budget.requested("b") == .wait)
        #expect(budget.shutdown() == ["b"])
        #expect(budget.released("a") == nil)
        #expect(budget.requested("c") == .refused)
    }
}
