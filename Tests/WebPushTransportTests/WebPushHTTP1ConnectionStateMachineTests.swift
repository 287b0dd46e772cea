import NIOCore
import Testing

@testable import WebPushTransport

@Suite("Web Push: one HTTP/1.1 keep-alive connection (state machine transcripts)")
struct WebPushHTTP1ConnectionStateMachineTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test("one request at a time: the next may be written only once the answer is complete")
    func oneAtATime() {
        var machine = WebPushHTTP1ConnectionStateMachine(idleTimeout: .seconds(60), now: start)
        #expect(machine.mayWrite)
        machine.requestWritten(answerDeadline: start + .seconds(30))
        #expect(!machine.mayWrite && machine.isAwaitingAnswer)
        #expect(machine.answerCompleted(keepAlive: true, now: start + .milliseconds(5)) == .pullNext)
        #expect(machine.mayWrite && !machine.isAwaitingAnswer)
    }

    @Test("an answer with Connection: close closes the connection instead of taking the next request")
    func serverCloses() {
        var machine = WebPushHTTP1ConnectionStateMachine(idleTimeout: nil, now: start)
        machine.requestWritten(answerDeadline: start + .seconds(30))
        #expect(machine.answerCompleted(keepAlive: false, now: start) == .close)
        #expect(!machine.mayWrite)
        #expect(machine.channelClosed() == false)
    }

    @Test("idle for the idle timeout since the last answer: closed; a busy connection is never idle")
    func idle() {
        var machine = WebPushHTTP1ConnectionStateMachine(idleTimeout: .seconds(10), now: start)
        #expect(machine.tick(now: start + .seconds(9)) == .none)
        machine.requestWritten(answerDeadline: start + .seconds(100))
        #expect(machine.tick(now: start + .seconds(20)) == .none)
        #expect(machine.answerCompleted(keepAlive: true, now: start + .seconds(20)) == .pullNext)
        #expect(machine.tick(now: start + .seconds(29)) == .none)
        #expect(machine.tick(now: start + .seconds(30)) == .closeIdle)
        #expect(!machine.mayWrite)
        #expect(machine.tick(now: start + .seconds(31)) == .none)
    }

    @Test("an answer not in by its deadline times out (the request fails, the connection closes)")
    func answerTimeout() {
        var machine = WebPushHTTP1ConnectionStateMachine(idleTimeout: nil, now: start)
        machine.requestWritten(answerDeadline: start + .seconds(30))
        #expect(machine.tick(now: start + .seconds(29)) == .none)
        #expect(machine.tick(now: start + .seconds(30)) == .answerTimedOut)
        // Already failed: the closed channel does not hand it back for a resend.
        #expect(machine.channelClosed() == false)
    }

    @Test("a close asked for while an answer is awaited waits for it; when idle it is immediate")
    func gracefulClose() {
        var busy = WebPushHTTP1ConnectionStateMachine(idleTimeout: nil, now: start)
        busy.requestWritten(answerDeadline: start + .seconds(30))
        #expect(busy.closeRequested() == .closeAfterAnswer)
        #expect(busy.isAwaitingAnswer)
        #expect(busy.answerCompleted(keepAlive: true, now: start) == .close)
        #expect(busy.closeRequested() == .none)

        var idle = WebPushHTTP1ConnectionStateMachine(idleTimeout: nil, now: start)
        #expect(idle.closeRequested() == .closeNow)
    }

    @Test("the channel closing with an answer awaited hands its request back; otherwise nothing")
    func dropped() {
        var machine = WebPushHTTP1ConnectionStateMachine(idleTimeout: nil, now: start)
        machine.requestWritten(answerDeadline: start + .seconds(30))
        #expect(machine.channelClosed() == true)
        var closing = WebPushHTTP1ConnectionStateMachine(idleTimeout: nil, now: start)
        closing.requestWritten(answerDeadline: start + .seconds(30))
        _ = closing.closeRequested()
        #expect(closing.channelClosed() == true)
        var idle = WebPushHTTP1ConnectionStateMachine(idleTimeout: nil, now: start)
        #expect(idle.channelClosed() == false)
    }

    @Test("an answer nobody asked for stops the connection")
    func unexpectedAnswer() {
        var machine = WebPushHTTP1ConnectionStateMachine(idleTimeout: nil, now: start)
        #expect(machine.answerCompleted(keepAlive: true, now: start) == .close)
        #expect(!machine.mayWrite)
    }
}
