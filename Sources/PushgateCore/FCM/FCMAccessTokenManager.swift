import Foundation
import Synchronization

/// Hands out the access token of one service account: fetched on first use, refreshed before it
/// expires, one fetch at a time however many requests need it, and replaced once when FCM answers
/// 401 to it.
///
/// The decisions are ``FCMAccessToken/StateMachine``'s; this class signs, exchanges and parks the
/// requests that arrive while a fetch without a usable token is in flight. Signing and the exchange
/// run outside the lock; waiters are resumed after it is released.
public final class FCMAccessTokenManager: Sendable, CustomStringConvertible {
    private typealias Waiter = CheckedContinuation<WaitResult, Never>

    private enum WaitResult: Sendable {
        case token(FCMAccessToken)
        case failed(FCMCredentialError)
        /// The fetch ended before the waiter was parked: ask the machine again.
        case again
    }

    private struct State: Sendable {
        var machine: FCMAccessToken.StateMachine
        var waiters: [Waiter] = []
        var fetching = false
        var fetches = 0
        var tokensObtained = 0
    }

    private let signer: FCMAssertionSigner
    private let exchanger: any FCMTokenExchanging
    private let clock: any WallClock
    private let state: Mutex<State>

    public init(
        signer: FCMAssertionSigner,
        exchanger: any FCMTokenExchanging,
        refreshMargin: Duration = FCMAccessToken.StateMachine.defaultRefreshMargin,
        clock: any WallClock = SystemWallClock()
    ) {
        self.signer = signer
        self.exchanger = exchanger
        self.clock = clock
        self.state = Mutex(State(machine: FCMAccessToken.StateMachine(refreshMargin: refreshMargin)))
    }

    public var account: FCMServiceAccount { signer.account }

    /// How many times a token was fetched (for metrics and tests), failed attempts included: a fetch
    /// that timed out or met an outage is tried again and counted again.
    public var fetches: Int { state.withLock { $0.fetches } }

    /// How many fetches produced a token: the refreshes, whatever the token endpoint's failures cost.
    public var tokensObtained: Int { state.withLock { $0.tokensObtained } }

    /// The token for the next request's `authorization` header.
    public func currentToken() async throws(FCMCredentialError) -> FCMAccessToken {
        while true {
            let action = state.withLock { (state: inout State) -> FCMAccessToken.StateMachine.RequestAction in
                let action = state.machine.tokenRequested(now: clock.now())
                if case .fetch = action {
                    state.fetching = true
                    state.fetches += 1
                }
                return action
            }
            switch action {
            case .use(let token):
                return token
            case .fetch(let issuedAt):
                return try await fetch(issuedAt: issuedAt)
            case .wait:
                let result = await withCheckedContinuation { (waiter: Waiter) in
                    let parked = state.withLock { (state: inout State) -> Bool in
                        guard state.fetching else { return false }
                        state.waiters.append(waiter)
                        return true
                    }
                    if !parked { waiter.resume(returning: .again) }
                }
                switch result {
                case .token(let token): return token
                case .failed(let error): throw error
                case .again: continue
                }
            }
        }
    }

    /// FCM answered 401 UNAUTHENTICATED to a request carrying `token`: the next request fetches a new
    /// one (once, for any number of rejections of the same token).
    @discardableResult
    public func tokenRejected(_ token: FCMAccessToken) -> FCMAccessToken.StateMachine.RejectionAction {
        state.withLock { $0.machine.tokenRejected(token) }
    }

    /// Sends with the current token; when FCM answers that the access token was rejected, refreshes
    /// it once and sends once more. The second answer is final, whatever it is.
    public func withAccessToken(
        _ send: (FCMAccessToken) async -> FCMOutcome
    ) async throws(FCMCredentialError) -> FCMOutcome {
        let token = try await currentToken()
        let first = await send(token)
        guard first.accessTokenRejected else { return first }
        tokenRejected(token)
        return await send(try await currentToken())
    }

    private func fetch(issuedAt: Date) async throws(FCMCredentialError) -> FCMAccessToken {
        let result: Result<FCMAccessToken, FCMCredentialError>
        do throws(FCMCredentialError) {
            let assertion = try signer.assertion(issuedAt: issuedAt)
            let grant = try await exchanger.exchange(assertion: assertion, tokenURI: signer.account.tokenURI)
            result = .success(grant.token(receivedAt: clock.now()))
        } catch {
            result = .failure(error)
        }
        let waiters = state.withLock { (state: inout State) -> [Waiter] in
            switch result {
            case .success(let token):
                state.machine.fetchSucceeded(token)
                state.tokensObtained += 1
            case .failure: state.machine.fetchFailed(now: clock.now())
            }
            state.fetching = false
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters {
            switch result {
            case .success(let token): waiter.resume(returning: .token(token))
            case .failure(let error): waiter.resume(returning: .failed(error))
            }
        }
        return try result.get()
    }

    public var description: String { "FCMAccessTokenManager(\(signer.account))" }
}
