import NIOCore
import Testing

@testable import PushTransport

/// A reload replaces a pool's credentials: the open connections drain, new ones are made.
@Suite("Connection pool state machine: credentials renewed")
struct ConnectionPoolRenewalTests {
    typealias Machine = ConnectionPoolStateMachine<TestRequest>
    let now = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func requests(_ range: Range<UInt64>) -> [TestRequest] {
        range.map { TestRequest(poolRequestID: $0, deadline: now + .seconds(30)) }
    }

    @Test func renewalRetiresEveryOpenConnectionWhichKeepsWhatItHoldsButTakesNothingNew() {
        var machine = Machine(configuration: .init(maximumConnections: 4))
        _ = machine.submit(requests(0..<2))
        _ = machine.connectionEstablished(0, availableStreams: 4)
        let (held, _) = machine.pull(connection: 0, released: 0, maximum: 4)
        #expect(held.map(\.poolRequestID) == [0, 1])

        let renewal = machine.credentialsRenewed()
        #expect(renewal.close == [0], "the open connection is asked to finish what it holds and close")
        #expect(renewal.fail.isEmpty, "nothing in flight fails")
        #expect(renewal.connect == nil, "nothing is queued: no connection yet")
        #expect(machine.submit(requests(2..<3)).connect == 1, "new work opens a new connection")
        #expect(
            machine.pull(connection: 0, released: 1, maximum: 4).requests.isEmpty,
            "the old connection takes nothing new while it drains"
        )
        _ = machine.connectionEstablished(1, availableStreams: 4)
        #expect(machine.pull(connection: 1, released: 0, maximum: 4).requests.map(\.poolRequestID) == [2])
        #expect(machine.connectionClosed(0).isEmpty)
        #expect(machine.connectionCount == 1)
    }

    @Test func queuedWorkGetsANewConnectionAtOnceWhileTheOldOnesDrain() {
        var machine = Machine(configuration: .init(maximumConnections: 4))
        _ = machine.submit(requests(0..<3))
        #expect(machine.connectionEstablished(0, availableStreams: 2).connect == 1, "the third asks for another")
        _ = machine.pull(connection: 0, released: 0, maximum: 2)
        let renewal = machine.credentialsRenewed()
        #expect(renewal.close == [0])
        #expect(renewal.connect == 2, "the second one, made with the old credentials, does not count")
        #expect(machine.connectionEstablished(1, availableStreams: 2).close == [1])
        _ = machine.connectionEstablished(2, availableStreams: 2)
        #expect(machine.pull(connection: 2, released: 0, maximum: 2).requests.map(\.poolRequestID) == [2])
    }

    @Test func aConnectionStillConnectingWithTheOldCredentialsClosesOnceEstablished() {
        var machine = Machine(configuration: .init(maximumConnections: 4))
        #expect(machine.submit(requests(0..<1)).connect == 0)
        let renewal = machine.credentialsRenewed()
        #expect(renewal.close.isEmpty)
        #expect(renewal.connect == 1, "the one on its way does not count: it was made with the old credentials")
        let established = machine.connectionEstablished(0, availableStreams: 10)
        #expect(established.close == [0])
        #expect(established.wake.isEmpty)
        #expect(machine.pull(connection: 0, released: 0, maximum: 10).requests.isEmpty)
        _ = machine.connectionEstablished(1, availableStreams: 10)
        #expect(machine.pull(connection: 1, released: 0, maximum: 10).requests.map(\.poolRequestID) == [0])
    }

    @Test func renewalForgetsTheBackOffTheOldCredentialsEarned() {
        var machine = Machine(configuration: .init(maximumConnections: 2))
        #expect(machine.submit(requests(0..<1)).connect == 0)
        // A refused certificate: the attempt fails, and the next waits for a back-off.
        let failed = machine.connectionFailed(0, error: "TLS: certificate expired")
        #expect(failed.connectAfter != nil)
        #expect(machine.credentialsRenewed().connect != nil, "new credentials are tried at once")
    }

    @Test func aFailureOfAStaleAttemptSaysNothingAboutTheNewCredentials() throws {
        var machine = Machine(configuration: .init(maximumConnections: 2))
        _ = machine.submit(requests(0..<1))
        let renewal = machine.credentialsRenewed()
        let replacement = try #require(renewal.connect)
        let failed = machine.connectionFailed(0, error: "TLS: the old certificate was revoked")
        #expect(failed.connectAfter == nil, "no back-off for the old credentials' failure")
        #expect(failed.connect == nil, "the replacement is already on its way")
        _ = machine.connectionEstablished(replacement, availableStreams: 1)
        #expect(machine.pull(connection: replacement, released: 0, maximum: 1).requests.count == 1)
    }

    @Test func renewalAfterShutdownDoesNothing() {
        var machine = Machine(configuration: .init(maximumConnections: 2))
        _ = machine.submit(requests(0..<1))
        _ = machine.connectionEstablished(0, availableStreams: 1)
        _ = machine.shutdown()
        #expect(machine.credentialsRenewed().isEmpty)
    }
}
