import Foundation
import PushgateCore
import Testing

@Suite("Provider token refresh state machine")
struct ProviderTokenStateMachineTests {
    let start = Date.testEpoch

    private func at(minutes: Double) -> Date { start.addingTimeInterval(minutes * 60) }

    private func token(_ name: String, issuedAtMinute minute: Double) -> ProviderToken {
        ProviderToken(jwt: name, issuedAt: at(minutes: minute))
    }

    /// Runs a request; if the machine asks for a token, "signs" one named `name` at the requested time.
    private func request(
        _ machine: inout ProviderToken.StateMachine,
        atMinute minute: Double,
        mintingAs name: String
    ) -> (token: ProviderToken, minted: Bool) {
        switch machine.tokenRequested(now: at(minutes: minute)) {
        case .use(let token):
            return (token, false)
        case .mint(let issuedAt):
            let token = ProviderToken(jwt: name, issuedAt: issuedAt)
            machine.tokenMinted(token)
            return (token, true)
        }
    }

    @Test("the first request mints a token issued now")
    func firstRequestMints() {
        var machine = ProviderToken.StateMachine()
        #expect(machine.currentToken == nil)
        #expect(machine.tokenRequested(now: start) == .mint(issuedAt: start))
    }

    @Test("the token is reused until the default refresh age of 50 minutes, then replaced")
    func reuseWithinWindowThenRefresh() {
        var machine = ProviderToken.StateMachine()
        let first = token("first", issuedAtMinute: 0)
        machine.tokenMinted(first)
        for minute in [0.0, 1, 19, 20, 30, 49, 49.99] {
            #expect(machine.tokenRequested(now: at(minutes: minute)) == .use(first))
        }
        #expect(machine.tokenRequested(now: at(minutes: 50)) == .mint(issuedAt: at(minutes: 50)))
        let second = token("second", issuedAtMinute: 50)
        machine.tokenMinted(second)
        #expect(machine.currentToken == second)
        #expect(machine.tokenRequested(now: at(minutes: 99)) == .use(second))
        #expect(machine.tokenRequested(now: at(minutes: 100)) == .mint(issuedAt: at(minutes: 100)))
    }

    @Test("a configured refresh age is honoured", arguments: [20, 30, 45, 55, 59])
    func configuredRefreshAge(minutes: Int) {
        var machine = ProviderToken.StateMachine(configuration: .init(refreshAge: .minutes(minutes)))
        machine.tokenMinted(token("first", issuedAtMinute: 0))
        #expect(
            machine.tokenRequested(now: at(minutes: Double(minutes) - 0.01)) == .use(token("first", issuedAtMinute: 0))
        )
        #expect(
            machine.tokenRequested(now: at(minutes: Double(minutes))) == .mint(issuedAt: at(minutes: Double(minutes)))
        )
    }

    @Test("the token is never refreshed before 20 minutes, even when configured to")
    func neverBeforeTwentyMinutes() {
        for asked in [Duration.zero, .seconds(1), .minutes(5), .minutes(19)] {
            var machine = ProviderToken.StateMachine(configuration: .init(refreshAge: asked))
            #expect(machine.refreshAge == .minutes(20))
            let first = token("first", issuedAtMinute: 0)
            machine.tokenMinted(first)
            for minute in [1.0, 5, 10, 19, 19.99] {
                #expect(machine.tokenRequested(now: at(minutes: minute)) == .use(first))
            }
            #expect(machine.tokenRequested(now: at(minutes: 20)) == .mint(issuedAt: at(minutes: 20)))
        }
    }

    @Test("the token is always refreshed before it is an hour old, even when configured not to")
    func alwaysBeforeSixtyMinutes() {
        for asked in [Duration.minutes(60), .minutes(90), .seconds(86_400)] {
            var machine = ProviderToken.StateMachine(configuration: .init(refreshAge: asked))
            #expect(machine.refreshAge == .minutes(59))
            machine.tokenMinted(token("first", issuedAtMinute: 0))
            #expect(machine.tokenRequested(now: at(minutes: 59)) == .mint(issuedAt: at(minutes: 59)))
        }
    }

    @Test("refresh ages inside Apple's window are valid, outside are not")
    func refreshAgeValidation() {
        typealias Configuration = ProviderTokenManager.Configuration
        #expect(Configuration().refreshAge == .minutes(50))
        #expect(!Configuration.isValidRefreshAge(.minutes(20) - .seconds(1)))
        #expect(Configuration.isValidRefreshAge(.minutes(20)))
        #expect(Configuration.isValidRefreshAge(.minutes(50)))
        #expect(Configuration.isValidRefreshAge(.minutes(59)))
        #expect(!Configuration.isValidRefreshAge(.minutes(60)))
        var configuration = Configuration()
        configuration.refreshAge = .minutes(3)
        #expect(configuration.refreshAge == .minutes(20))
    }

    @Test("a clock that went backwards reuses the token instead of minting")
    func clockWentBackwards() {
        var machine = ProviderToken.StateMachine()
        let first = token("first", issuedAtMinute: 0)
        machine.tokenMinted(first)
        #expect(machine.tokenRequested(now: at(minutes: -30)) == .use(first))
    }

    @Test("a failed mint is retried by the next request")
    func failedMintIsRetried() {
        var machine = ProviderToken.StateMachine()
        #expect(machine.tokenRequested(now: start) == .mint(issuedAt: start))
        // The signer failed: no tokenMinted.
        #expect(machine.tokenRequested(now: at(minutes: 1)) == .mint(issuedAt: at(minutes: 1)))
    }

    @Test("ExpiredProviderToken for the token in use replaces it on the next request")
    func expiredTokenIsReplaced() {
        var machine = ProviderToken.StateMachine()
        let first = token("first", issuedAtMinute: 0)
        machine.tokenMinted(first)
        #expect(machine.expiredTokenRejected(token: first, now: at(minutes: 30)) == .replace)
        #expect(machine.currentToken == nil)
        #expect(machine.tokenRequested(now: at(minutes: 30)) == .mint(issuedAt: at(minutes: 30)))
    }

    @Test("a burst of ExpiredProviderToken for one token mints one replacement")
    func burstOfRejectionsMintsOnce() {
        var machine = ProviderToken.StateMachine()
        _ = request(&machine, atMinute: 0, mintingAs: "first")
        let first = token("first", issuedAtMinute: 0)
        // Ten requests in flight with `first` all come back rejected, some after the replacement.
        #expect(machine.expiredTokenRejected(token: first, now: at(minutes: 40)) == .replace)
        for _ in 0..<4 {
            #expect(machine.expiredTokenRejected(token: first, now: at(minutes: 40)) == .alreadyReplaced)
        }
        let replacement = request(&machine, atMinute: 40, mintingAs: "second")
        #expect(replacement.minted)
        for _ in 0..<5 {
            #expect(machine.expiredTokenRejected(token: first, now: at(minutes: 40.1)) == .alreadyReplaced)
            // Their retries use the replacement.
            let retry = request(&machine, atMinute: 40.1, mintingAs: "third")
            #expect(!retry.minted)
            #expect(retry.token == replacement.token)
        }
    }

    @Test("a token rejected while younger than 20 minutes is still replaced, and reported as young")
    func youngTokenIsReplacedAndReported() {
        var machine = ProviderToken.StateMachine()
        let first = token("first", issuedAtMinute: 0)
        machine.tokenMinted(first)
        #expect(machine.expiredTokenRejected(token: first, now: at(minutes: 5)) == .replaceYoungToken(age: .minutes(5)))
        #expect(machine.tokenRequested(now: at(minutes: 5)) == .mint(issuedAt: at(minutes: 5)))
    }

    @Test("a rejection of a token that was already refreshed by age changes nothing")
    func rejectionOfRefreshedToken() {
        var machine = ProviderToken.StateMachine()
        _ = request(&machine, atMinute: 0, mintingAs: "first")
        let second = request(&machine, atMinute: 50, mintingAs: "second")
        #expect(second.minted)
        #expect(
            machine.expiredTokenRejected(token: token("first", issuedAtMinute: 0), now: at(minutes: 51))
                == .alreadyReplaced
        )
        #expect(machine.tokenRequested(now: at(minutes: 51)) == .use(second.token))
    }

    @Test("a rejection before any token was minted, or of a stranger's token, changes nothing")
    func rejectionOfUnknownToken() {
        var machine = ProviderToken.StateMachine()
        #expect(
            machine.expiredTokenRejected(token: token("stranger", issuedAtMinute: 0), now: start) == .alreadyReplaced
        )
        let first = request(&machine, atMinute: 0, mintingAs: "first")
        #expect(
            machine.expiredTokenRejected(token: token("stranger", issuedAtMinute: 0), now: at(minutes: 30))
                == .alreadyReplaced
        )
        #expect(machine.tokenRequested(now: at(minutes: 30)) == .use(first.token))
    }

    @Test("the replacement of a rejected token is refreshed on its own schedule")
    func replacementHasItsOwnSchedule() {
        var machine = ProviderToken.StateMachine()
        _ = request(&machine, atMinute: 0, mintingAs: "first")
        _ = machine.expiredTokenRejected(token: token("first", issuedAtMinute: 0), now: at(minutes: 30))
        let second = request(&machine, atMinute: 30, mintingAs: "second")
        #expect(machine.tokenRequested(now: at(minutes: 79)) == .use(second.token))
        #expect(machine.tokenRequested(now: at(minutes: 80)) == .mint(issuedAt: at(minutes: 80)))
    }
}
