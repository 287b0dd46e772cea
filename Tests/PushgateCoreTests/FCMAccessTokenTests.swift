import Foundation
import PushgateCore
import Synchronization
import Testing

@Suite("FCM access token state machine")
struct FCMAccessTokenStateMachineTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    func token(_ value: String, expiresIn seconds: TimeInterval) -> FCMAccessToken {
        FCMAccessToken(value: value, expiresAt: t0.addingTimeInterval(seconds))
    }

    @Test("the first request fetches, later ones wait, then everyone uses the fetched token")
    func firstFetch() {
        var machine = FCMAccessToken.StateMachine()
        #expect(machine.tokenRequested(now: t0) == .fetch(issuedAt: t0))
        #expect(machine.tokenRequested(now: t0) == .wait)
        let first = token("a", expiresIn: 3600)
        machine.fetchSucceeded(first)
        #expect(machine.tokenRequested(now: t0.addingTimeInterval(1)) == .use(first))
    }

    @Test("a token is refreshed once, five minutes before expiry; others keep using it meanwhile")
    func refreshBeforeExpiry() {
        var machine = FCMAccessToken.StateMachine()
        _ = machine.tokenRequested(now: t0)
        let first = token("a", expiresIn: 3600)
        machine.fetchSucceeded(first)
        #expect(machine.tokenRequested(now: t0.addingTimeInterval(3299)) == .use(first))
        let due = t0.addingTimeInterval(3300)
        #expect(machine.tokenRequested(now: due) == .fetch(issuedAt: due))
        #expect(machine.tokenRequested(now: due) == .use(first))
        #expect(machine.tokenRequested(now: t0.addingTimeInterval(3600)) == .wait)
        let second = token("b", expiresIn: 7200)
        machine.fetchSucceeded(second)
        #expect(machine.tokenRequested(now: t0.addingTimeInterval(3600)) == .use(second))
    }

    @Test("a token living less than twice the margin is refreshed half-way through its life, not at once")
    func shortLivedToken() {
        var machine = FCMAccessToken.StateMachine()
        _ = machine.tokenRequested(now: t0)
        let short = FCMTokenGrant(accessToken: "a", expiresIn: .seconds(60)).token(receivedAt: t0)
        machine.fetchSucceeded(short)
        #expect(machine.tokenRequested(now: t0.addingTimeInterval(1)) == .use(short))
        #expect(machine.tokenRequested(now: t0.addingTimeInterval(29)) == .use(short))
        let due = t0.addingTimeInterval(30)
        #expect(machine.tokenRequested(now: due) == .fetch(issuedAt: due))
        // An hour-long grant keeps the five-minute margin.
        let long = FCMTokenGrant(accessToken: "b", expiresIn: .seconds(3600)).token(receivedAt: t0)
        #expect(!long.isRefreshDue(now: t0.addingTimeInterval(3299), margin: .seconds(300)))
        #expect(long.isRefreshDue(now: t0.addingTimeInterval(3300), margin: .seconds(300)))
    }

    @Test("a failed fetch keeps a still-valid token, or lets the next request fetch again")
    func fetchFailure() {
        var machine = FCMAccessToken.StateMachine()
        _ = machine.tokenRequested(now: t0)
        machine.fetchFailed(now: t0)
        #expect(machine.tokenRequested(now: t0) == .fetch(issuedAt: t0))
        let first = token("a", expiresIn: 3600)
        machine.fetchSucceeded(first)
        let due = t0.addingTimeInterval(3400)
        #expect(machine.tokenRequested(now: due) == .fetch(issuedAt: due))
        machine.fetchFailed(now: due)
        #expect(machine.currentToken == first)
        #expect(machine.tokenRequested(now: due) == .fetch(issuedAt: due))
    }

    @Test("a 401 for the token in use makes the next request fetch; repeats and stale tokens change nothing")
    func rejection() {
        var machine = FCMAccessToken.StateMachine()
        _ = machine.tokenRequested(now: t0)
        let first = token("a", expiresIn: 3600)
        machine.fetchSucceeded(first)
        #expect(machine.tokenRejected(first) == .refresh)
        #expect(machine.tokenRejected(first) == .alreadyReplaced)
        #expect(machine.tokenRequested(now: t0) == .fetch(issuedAt: t0))
        #expect(machine.tokenRejected(first) == .alreadyReplaced)
        #expect(machine.tokenRequested(now: t0) == .wait)
    }
}

/// A token endpoint stand-in: counts exchanges, grants `token-N`, and can be told to fail or to hold
/// each exchange until released.
final class ScriptedExchanger: FCMTokenExchanging {
    private struct State {
        var exchanges = 0
        var failNext = false
        var held: [CheckedContinuation<Void, Never>] = []
        var hold = false
    }
    private let state = Mutex(State())
    let expiresIn: Duration
    init(expiresIn: Duration = .seconds(3600), hold: Bool = false) {
        self.expiresIn = expiresIn
        state.withLock { $0.hold = hold }
        (heldExchanges, heldContinuation) = AsyncStream<Void>.makeStream()
    }

    var exchanges: Int { state.withLock { $0.exchanges } }
    /// Yields once for each exchange that is being held.
    let heldExchanges: AsyncStream<Void>
    private let heldContinuation: AsyncStream<Void>.Continuation
    func failNext() { state.withLock { $0.failNext = true } }
    func releaseAll() {
        let held = state.withLock { state in
            state.hold = false
            defer { state.held.removeAll() }
            return state.held
        }
        for waiter in held { waiter.resume() }
    }

    func exchange(assertion: String, tokenURI: URL) async throws(FCMCredentialError) -> FCMTokenGrant {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let parked = state.withLock { state in
                guard state.hold else { return false }
                state.held.append(waiter)
                return true
            }
            if parked { heldContinuation.yield() } else { waiter.resume() }
        }
        let (number, fail) = state.withLock { state in
            state.exchanges += 1
            defer { state.failNext = false }
            return (state.exchanges, state.failNext)
        }
        if fail { throw .exchangeFailed(detail: "scripted") }
        #expect(assertion.split(separator: ".").count == 3)
        return FCMTokenGrant(accessToken: "token-\(number)", expiresIn: expiresIn)
    }
}

@Suite("FCM access token manager")
struct FCMAccessTokenManagerTests {
    let clock = ManualWallClock(Date(timeIntervalSince1970: 1_800_000_000))

    func manager(_ exchanger: ScriptedExchanger) throws -> FCMAccessTokenManager {
        FCMAccessTokenManager(
            signer: FCMAssertionSigner(account: try FCMTestAccount.account()),
            exchanger: exchanger,
            clock: clock
        )
    }

    @Test("concurrent first requests share one exchange")
    func oneFetchAtATime() async throws {
        let exchanger = ScriptedExchanger(hold: true)
        let manager = try manager(exchanger)
        let tokens = try await withThrowingTaskGroup(of: FCMAccessToken.self) { group in
            for _ in 0..<20 { group.addTask { try await manager.currentToken() } }
            // Wait for the one exchange to be under way; the other 19 requests park on it.
            var held = exchanger.heldExchanges.makeAsyncIterator()
            await held.next()
            exchanger.releaseAll()
            return try await group.reduce(into: [FCMAccessToken]()) { $0.append($1) }
        }
        #expect(tokens.count == 20)
        #expect(Set(tokens.map(\.value)) == ["token-1"])
        #expect(exchanger.exchanges == 1)
        #expect(manager.fetches == 1)
    }

    @Test("the token is reused until five minutes before expiry, then refreshed on the injected clock")
    func refreshOnClock() async throws {
        let exchanger = ScriptedExchanger()
        let manager = try manager(exchanger)
        let first = try await manager.currentToken()
        #expect(first.expiresAt == clock.now().addingTimeInterval(3600))
        clock.advance(by: 3299)
        #expect(try await manager.currentToken() == first)
        clock.advance(by: 1)
        #expect(try await manager.currentToken().value == "token-2")
        #expect(exchanger.exchanges == 2)
    }

    @Test("a failed exchange is reported and the next request tries again")
    func failureRetried() async throws {
        let exchanger = ScriptedExchanger()
        let manager = try manager(exchanger)
        exchanger.failNext()
        await #expect(throws: FCMCredentialError.exchangeFailed) { try await manager.currentToken() }
        #expect(try await manager.currentToken().value == "token-2")
        // Both attempts count as fetches; only the one that produced a token counts as obtained.
        #expect(manager.fetches == 2)
        #expect(manager.tokensObtained == 1)
    }

    @Test("a 401 refreshes the token once and resends once with the new token")
    func refreshOnceThenResend() async throws {
        let exchanger = ScriptedExchanger()
        let manager = try manager(exchanger)
        let unauthenticated = FCMOutcome.answered(status: 401, body: [], now: clock.now())
        let sent = Mutex<[String]>([])
        let outcome = try await manager.withAccessToken { token in
            sent.withLock { $0.append(token.value) }
            return token.value == "token-1" ? unauthenticated : .answered(status: 200, body: [], now: Date())
        }
        #expect(outcome.isAccepted)
        #expect(sent.withLock { $0 } == ["token-1", "token-2"])
    }

    @Test("a second 401 is final: no third send, no second refresh")
    func secondRejectionFinal() async throws {
        let exchanger = ScriptedExchanger()
        let manager = try manager(exchanger)
        let sends = Mutex(0)
        let outcome = try await manager.withAccessToken { _ in
            sends.withLock { $0 += 1 }
            return .answered(status: 401, body: [], now: Date())
        }
        #expect(outcome.accessTokenRejected)
        #expect(outcome.outcomeClass == .retryable)
        #expect(sends.withLock { $0 } == 2)
        #expect(exchanger.exchanges == 2)
    }

    @Test("a grant is parsed from the token endpoint's JSON; a grant without a token is refused")
    func grantParsing() throws {
        let grant = try FCMTokenGrant(
            jsonBytes: Array(#"{"access_token":"ya29.x","expires_in":3599,"token_type":"Bearer"}"#.utf8)
        )
        #expect(grant == FCMTokenGrant(accessToken: "ya29.x", expiresIn: .seconds(3599)))
        #expect(throws: FCMCredentialError.malformedGrant) {
            try FCMTokenGrant(jsonBytes: Array(#"{"expires_in":3599}"#.utf8))
        }
        #expect(throws: FCMCredentialError.malformedGrant) {
            try FCMTokenGrant(jsonBytes: Array(#"{"access_token":"x","expires_in":0}"#.utf8))
        }
        #expect(!FCMAccessToken(value: "ya29.secret", expiresAt: Date()).description.contains("secret"))
    }
}
