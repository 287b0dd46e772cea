import NIOCore
import NIOHTTP2
import Testing

@testable import APNsHTTP2

@Suite("APNs connection state machine")
struct APNsConnectionStateMachineTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func makeMachine(
        pingInterval: TimeAmount? = .minutes(60),
        pingTimeout: TimeAmount = .seconds(20),
        idleTimeout: TimeAmount? = .hours(24),
        maximumStreams: Int? = nil
    ) -> APNsConnectionStateMachine {
        APNsConnectionStateMachine(
            configuration: .init(
                pingInterval: pingInterval,
                pingTimeout: pingTimeout,
                idleTimeout: idleTimeout,
                maximumStreams: maximumStreams
            ),
            now: start
        )
    }

    @Test func noStreamMayOpenBeforeTheServersFirstSettings() {
        var machine = makeMachine()
        #expect(machine.availableStreams == 0)
        #expect(
            machine.settingsReceived(maximumConcurrentStreams: 500, now: start) == .becameReady(availableStreams: 500)
        )
        #expect(machine.availableStreams == 500)
    }

    @Test func streamIDsRunOutAndTheConnectionSaysSo() {
        var machine = APNsConnectionStateMachine(configuration: .init(lastUsableStreamID: 7), now: start)
        _ = machine.settingsReceived(maximumConcurrentStreams: 100, now: start)
        #expect(machine.availableStreams == 4)  // 1, 3, 5, 7
        let ids = (0..<4).map { _ in machine.openStream(now: start) }
        #expect(ids.map { Int($0) } == [1, 3, 5, 7])
        #expect(machine.streamIDsExhausted)
        #expect(machine.availableStreams == 0)
        _ = machine.streamClosed(ids[0], now: start)
        #expect(machine.availableStreams == 0, "a freed stream does not give back its id")
    }

    @Test func settingsWithoutALimitMeanALargeFiniteDefault() {
        var machine = makeMachine()
        #expect(
            machine.settingsReceived(maximumConcurrentStreams: nil, now: start) == .becameReady(availableStreams: 1000)
        )
    }

    @Test func ourOwnCapLowersTheServersLimit() {
        var machine = makeMachine(maximumStreams: 100)
        #expect(
            machine.settingsReceived(maximumConcurrentStreams: 1500, now: start) == .becameReady(availableStreams: 100)
        )
    }

    @Test func streamIDsAreOddAndIncreasing() {
        var machine = makeMachine()
        _ = machine.settingsReceived(maximumConcurrentStreams: 10, now: start)
        let ids = (0..<4).map { _ in machine.openStream(now: start) }
        #expect(ids == [1, 3, 5, 7])
        #expect(machine.availableStreams == 6)
    }

    @Test func loweringMaxConcurrentStreamsMidFlightStopsNewStreamsUntilEnoughClose() {
        var machine = makeMachine()
        _ = machine.settingsReceived(maximumConcurrentStreams: 5, now: start)
        let ids = (0..<5).map { _ in machine.openStream(now: start) }
        // 0 available before and after
        #expect(machine.settingsReceived(maximumConcurrentStreams: 1, now: start) == .none)
        #expect(machine.availableStreams == 0)
        for id in ids.prefix(4) { _ = machine.streamClosed(id, now: start) }
        #expect(machine.availableStreams == 0, "one stream still open and the limit is one")
        _ = machine.streamClosed(ids[4], now: start)
        #expect(machine.availableStreams == 1)
    }

    @Test func raisingTheLimitReportsTheNewCapacity() {
        var machine = makeMachine()
        _ = machine.settingsReceived(maximumConcurrentStreams: 1, now: start)
        #expect(
            machine.settingsReceived(maximumConcurrentStreams: 500, now: start)
                == .capacityChanged(availableStreams: 500)
        )
    }

    @Test func goAwaySplitsOpenStreamsAtTheLastStreamID() {
        var machine = makeMachine()
        _ = machine.settingsReceived(maximumConcurrentStreams: 100, now: start)
        for _ in 0..<6 { _ = machine.openStream(now: start) }  // 1 3 5 7 9 11
        let action = machine.goAwayReceived(lastStreamID: 7, now: start)
        #expect(action == .retire(unprocessed: [9, 11], awaiting: 4, closeNow: false))
        #expect(machine.availableStreams == 0, "no new streams after GOAWAY")
        #expect(machine.state == .goingAway(lastStreamID: 7))
        // The ones at or below 7 are answered; the last one closes the connection.
        #expect(machine.streamClosed(1, now: start) == .none)
        #expect(machine.streamClosed(3, now: start) == .none)
        #expect(machine.streamClosed(5, now: start) == .none)
        #expect(machine.streamClosed(7, now: start) == .closeConnection)
    }

    @Test func goAwayWithNothingAtOrBelowTheLastStreamClosesAtOnce() {
        var machine = makeMachine()
        _ = machine.settingsReceived(maximumConcurrentStreams: 100, now: start)
        _ = machine.openStream(now: start)
        _ = machine.openStream(now: start)
        #expect(
            machine.goAwayReceived(lastStreamID: 0, now: start)
                == .retire(unprocessed: [1, 3], awaiting: 0, closeNow: true)
        )
    }

    @Test func aSecondGoAwayMayOnlyLowerTheLastStreamID() {
        var machine = makeMachine()
        _ = machine.settingsReceived(maximumConcurrentStreams: 100, now: start)
        for _ in 0..<4 { _ = machine.openStream(now: start) }  // 1 3 5 7
        #expect(
            machine.goAwayReceived(lastStreamID: .maxID, now: start)
                == .retire(unprocessed: [], awaiting: 4, closeNow: false)
        )
        #expect(
            machine.goAwayReceived(lastStreamID: 3, now: start)
                == .retire(unprocessed: [5, 7], awaiting: 2, closeNow: false)
        )
        #expect(machine.goAwayReceived(lastStreamID: 5, now: start) == .none)
    }

    @Test func pingIsSentAfterTheIdleIntervalAndItsAckClearsIt() {
        var machine = makeMachine(pingInterval: .minutes(60), pingTimeout: .seconds(20), idleTimeout: nil)
        _ = machine.settingsReceived(maximumConcurrentStreams: 100, now: start)
        #expect(machine.tick(now: start + .minutes(59)) == .none)
        #expect(machine.nextTickDeadline() == start + .minutes(60))
        #expect(machine.tick(now: start + .minutes(60)) == .sendPing)
        #expect(machine.tick(now: start + .minutes(60) + .seconds(1)) == .none, "one ping outstanding at a time")
        machine.pingAcknowledged(now: start + .minutes(60) + .seconds(2))
        #expect(machine.tick(now: start + .minutes(119)) == .none)
        #expect(machine.tick(now: start + .minutes(120) + .seconds(2)) == .sendPing)
    }

    @Test func anUnansweredPingClosesTheConnection() {
        var machine = makeMachine(pingInterval: .seconds(10), pingTimeout: .seconds(5), idleTimeout: nil)
        _ = machine.settingsReceived(maximumConcurrentStreams: 100, now: start)
        #expect(machine.tick(now: start + .seconds(10)) == .sendPing)
        #expect(machine.tick(now: start + .seconds(14)) == .none)
        #expect(machine.tick(now: start + .seconds(15)) == .closePingTimedOut)
        #expect(machine.state == .closing)
    }

    /// Issue #27: a busy connection (or a busy host that has not read the acknowledgement yet) is not
    /// dead; closing it would cut its streams unanswered, whose fate is then unknown.
    @Test func framesReadAfterThePingKeepTheConnectionUntilNothingIsReadForTheTimeout() {
        var machine = makeMachine(pingInterval: .seconds(10), pingTimeout: .seconds(5), idleTimeout: nil)
        _ = machine.settingsReceived(maximumConcurrentStreams: 100, now: start)
        #expect(machine.tick(now: start + .seconds(10)) == .sendPing)
        machine.frameRead(now: start + .seconds(13))
        #expect(machine.tick(now: start + .seconds(15)) == .none, "answers arrive: alive")
        #expect(machine.nextTickDeadline() == start + .seconds(18))
        #expect(machine.tick(now: start + .seconds(17)) == .none)
        #expect(machine.tick(now: start + .seconds(18)) == .closePingTimedOut)
    }

    @Test func readingFramesPostponesThePing() {
        var machine = makeMachine(pingInterval: .seconds(10), idleTimeout: nil)
        _ = machine.settingsReceived(maximumConcurrentStreams: 100, now: start)
        machine.frameRead(now: start + .seconds(8))
        #expect(machine.tick(now: start + .seconds(10)) == .none)
        #expect(machine.tick(now: start + .seconds(18)) == .sendPing)
    }

    @Test func idleConnectionClosesOnlyWithNoOpenStream() {
        var machine = makeMachine(pingInterval: nil, idleTimeout: .seconds(30))
        _ = machine.settingsReceived(maximumConcurrentStreams: 100, now: start)
        let id = machine.openStream(now: start)
        #expect(machine.tick(now: start + .seconds(31)) == .none, "a stream is open")
        _ = machine.streamClosed(id, now: start + .seconds(40))
        #expect(machine.tick(now: start + .seconds(69)) == .none)
        #expect(machine.tick(now: start + .seconds(70)) == .closeIdle)
    }

    @Test func aServerThatNeverSendsSettingsIsGivenUpOn() {
        var machine = makeMachine(pingTimeout: .seconds(5))
        #expect(machine.tick(now: start + .seconds(4)) == .none)
        #expect(machine.tick(now: start + .seconds(5)) == .closePingTimedOut)
    }

    @Test func closeRequestedLetsOpenStreamsFinishThenCloses() {
        var machine = makeMachine()
        _ = machine.settingsReceived(maximumConcurrentStreams: 100, now: start)
        let a = machine.openStream(now: start)
        let b = machine.openStream(now: start)
        #expect(machine.closeRequested() == false)
        #expect(machine.availableStreams == 0)
        #expect(machine.streamClosed(a, now: start) == .none)
        #expect(machine.streamClosed(b, now: start) == .closeConnection)
    }

    @Test func channelClosedReportsUnansweredStreams() {
        var machine = makeMachine()
        _ = machine.settingsReceived(maximumConcurrentStreams: 100, now: start)
        _ = machine.openStream(now: start)
        _ = machine.openStream(now: start)
        #expect(machine.channelClosed() == [1, 3])
        #expect(machine.state == .closed)
        #expect(machine.availableStreams == 0)
    }
}
