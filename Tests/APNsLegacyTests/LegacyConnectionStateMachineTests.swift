import APNsLegacy
import NIOCore
import PushgateCore
import Testing

/// The send window replayed as transcripts: requests are plain strings, time is a number of
/// milliseconds on a made-up clock.
@Suite("Legacy send window")
struct LegacyConnectionStateMachineTests {
    typealias Window = LegacyConnectionStateMachine<String>

    private func at(_ milliseconds: Int64) -> NIODeadline {
        .uptimeNanoseconds(1_000_000_000 + UInt64(milliseconds) * 1_000_000)
    }

    private func window(writing names: [String], at milliseconds: Int64 = 0, quietTime: Int64 = 1000) -> Window {
        var window = Window(quietTime: .milliseconds(quietTime))
        let identifiers = window.willWrite(names)
        if let last = identifiers.last { window.writeCompleted(through: last, at: at(milliseconds)) }
        return window
    }

    @Test("identifiers count up from 1, one per notification, in write order")
    func identifiers() {
        var window = Window(quietTime: .seconds(1))
        #expect(window.upcomingIdentifier == 1)
        #expect(window.willWrite(["a", "b", "c"]) == [1, 2, 3])
        #expect(window.willWrite(["d"]) == [4])
        #expect(window.unconfirmedCount == 4)
    }

    @Test("an error response: before it delivered, it failed with its status, after it resent")
    func errorResponseSplitsTheWindow() {
        var window = window(writing: ["a", "b", "c", "d", "e"])
        let action = window.errorResponseReceived(status: .invalidToken, identifier: 3)
        #expect(action.delivered == ["a", "b"])
        #expect(action.failed?.request == "c")
        #expect(action.failed?.status == .invalidToken)
        #expect(action.resend == ["d", "e"])
        #expect(!action.identifierUnknown)
        #expect(window.unconfirmedCount == 0)
        #expect(!window.isOpen)
        // The gateway closes after its answer: nothing is left to hand back twice.
        #expect(window.connectionClosed().isEmpty)
    }

    @Test("Shutdown names the last one processed: it and those before are delivered, the rest resent")
    func shutdown() {
        var window = window(writing: ["a", "b", "c", "d"])
        let action = window.errorResponseReceived(status: .shutdown, identifier: 2)
        #expect(action.delivered == ["a", "b"])
        #expect(action.failed == nil)
        #expect(action.resend == ["c", "d"])
        #expect(!action.identifierUnknown)
    }

    @Test("Shutdown naming 0 or the identifier just before the window: everything in it is resent, exactly")
    func shutdownBeforeAnything() {
        var untouched = window(writing: ["a", "b"])
        let nothing = untouched.errorResponseReceived(status: .shutdown, identifier: 0)
        #expect(nothing.resend == ["a", "b"] && nothing.delivered.isEmpty && !nothing.identifierUnknown)

        var window = window(writing: ["a", "b"], at: 0, quietTime: 100)
        #expect(window.tick(now: at(100)) == ["a", "b"])
        #expect(window.willWrite(["c", "d"]) == [3, 4])
        let action = window.errorResponseReceived(status: .shutdown, identifier: 2)
        #expect(action.resend == ["c", "d"])
        #expect(!action.identifierUnknown)
    }

    @Test("quiet time: confirmed in send order once it passes after the write, not before")
    func quietTimeConfirms() {
        var window = Window(quietTime: .milliseconds(1000))
        _ = window.willWrite(["a", "b"])
        window.writeCompleted(through: 2, at: at(0))
        _ = window.willWrite(["c"])
        #expect(
            window.tick(now: at(5000)) == ["a", "b"],
            "c's write has not completed: its quiet time has not started"
        )
        window.writeCompleted(through: 3, at: at(5000))
        #expect(window.tick(now: at(5999)).isEmpty)
        #expect(window.tick(now: at(6000)) == ["c"])
        #expect(window.unconfirmedCount == 0)
    }

    @Test("connection lost without an error response: everything unconfirmed comes back, nothing confirmed does")
    func connectionLost() {
        var window = window(writing: ["a", "b"], at: 0)
        _ = window.willWrite(["c", "d"])
        window.writeCompleted(through: 4, at: at(800))
        #expect(window.tick(now: at(1000)) == ["a", "b"])
        #expect(window.connectionClosed() == ["c", "d"])
        #expect(window.tick(now: at(10_000)).isEmpty, "a closed connection confirms nothing")
        #expect(window.willWrite(["e"]).isEmpty, "a closed connection numbers nothing")
    }

    @Test("an error response for an identifier already confirmed: the window is resent and the answer flagged")
    func lateErrorResponse() {
        var window = window(writing: ["a", "b"], at: 0, quietTime: 100)
        #expect(window.tick(now: at(100)) == ["a", "b"])
        _ = window.willWrite(["c"])
        let action = window.errorResponseReceived(status: .invalidToken, identifier: 1)
        #expect(action.identifierUnknown)
        #expect(action.failed == nil)
        #expect(action.resend == ["c"])
    }

    @Test("Shutdown of an idle connection, everything confirmed: nothing to resend, nothing flagged")
    func shutdownWhenIdle() {
        var window = window(writing: ["a"], at: 0, quietTime: 100)
        #expect(window.tick(now: at(100)) == ["a"])
        let action = window.errorResponseReceived(status: .shutdown, identifier: 1)
        #expect(action.delivered.isEmpty && action.resend.isEmpty && !action.identifierUnknown)
    }

    @Test("a second error response changes nothing")
    func secondErrorResponse() {
        var window = window(writing: ["a", "b", "c"])
        _ = window.errorResponseReceived(status: .invalidToken, identifier: 2)
        let again = window.errorResponseReceived(status: .shutdown, identifier: 3)
        #expect(again.delivered.isEmpty && again.resend.isEmpty && again.failed == nil)
    }

    @Test("error on the first and on the last notification")
    func edges() {
        var first = window(writing: ["a", "b", "c"])
        let atFirst = first.errorResponseReceived(status: .invalidPayloadSize, identifier: 1)
        #expect(atFirst.delivered.isEmpty && atFirst.failed?.request == "a" && atFirst.resend == ["b", "c"])
        var last = window(writing: ["a", "b", "c"])
        let atLast = last.errorResponseReceived(status: .invalidToken, identifier: 3)
        #expect(atLast.delivered == ["a", "b"] && atLast.failed?.request == "c" && atLast.resend.isEmpty)
    }

    @Test("near 2^32 the arithmetic stays exact, and numbering stops before identifiers would wrap")
    func nearTheTopOfTheIdentifierSpace() {
        var window = Window(quietTime: .seconds(1), firstIdentifier: UInt32.max - 3)
        #expect(window.remainingIdentifiers == 3)
        #expect(window.willWrite(["a", "b", "c"]) == [UInt32.max - 3, UInt32.max - 2, UInt32.max - 1])
        #expect(window.remainingIdentifiers == 0, "the connection retires here rather than reuse identifiers")
        let action = window.errorResponseReceived(status: .invalidToken, identifier: UInt32.max - 2)
        #expect(action.delivered == ["a"] && action.failed?.request == "b" && action.resend == ["c"])
    }

    @Test("legacy statuses map onto the provider API's reasons and outcome classes")
    func statusMapping() {
        #expect(LegacyErrorStatus.invalidToken.outcome.reason == .badDeviceToken)
        #expect(LegacyErrorStatus.invalidToken.outcome.outcomeClass == .rejected)
        #expect(LegacyErrorStatus.invalidToken.outcome.reason?.invalidatesDevice == true)
        #expect(LegacyErrorStatus.invalidPayloadSize.outcome.reason == .payloadTooLarge)
        #expect(LegacyErrorStatus.invalidPayloadSize.outcome.outcomeClass == .rejected)
        #expect(LegacyErrorStatus.invalidPayloadSize.outcome.reason?.invalidatesDevice == false)
        #expect(LegacyErrorStatus.processingError.outcome.outcomeClass == .retryable)
        #expect(LegacyErrorStatus.unknownError.outcome.outcomeClass == .retryable)
        #expect(LegacyErrorStatus.protocolError.outcome.outcomeClass == .rejected)
        #expect(LegacyErrorStatus.missingPayload.outcome.reason == .payloadEmpty)
        #expect(LegacyErrorStatus.shutdown.apnsReason == nil)
        for status in LegacyErrorStatus.documented where status != .shutdown {
            #expect(status.apnsReason != nil, "\(status)")
        }
    }
}
