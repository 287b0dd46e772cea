import Foundation
import PushgateCore
import Synchronization

/// The access token the connections of one `FCMClient` write with: read on their event loops without
/// waiting, fetched through ``FCMAccessTokenManager`` (one fetch at a time) when there is none or it is
/// due, and dropped when FCM refuses it.
///
/// A connection that finds no token registers a wake-up and holds its work; the fetch's end wakes it.
/// A failed fetch is reported to every batch for ``failureHoldTime`` (each completes with a
/// configuration alarm) before the next fetch is tried, so a broken key does not fetch once per batch.
final class FCMBearerCache: Sendable {
    enum Availability {
        case token(FCMAccessToken)
        case failed(FCMCredentialError)
        /// None yet: the `wake` given will be called when the fetch under way ends.
        case wait
    }

    private struct State {
        var token: FCMAccessToken?
        /// A fetch is under way (its task is `fetch` once stored; `generation` tells fetches apart).
        var fetching = false
        var generation = 0
        var fetch: Task<Void, Never>?
        var failure: (error: FCMCredentialError, at: Date)?
        var waiting: [@Sendable () -> Void] = []
        var shutDown = false
    }

    static let failureHoldTime: TimeInterval = 1

    private let manager: FCMAccessTokenManager
    private let clock: any WallClock
    private let refreshMargin: Duration
    private let state = Mutex(State())

    init(
        manager: FCMAccessTokenManager,
        clock: any WallClock,
        refreshMargin: Duration = FCMAccessToken.StateMachine.defaultRefreshMargin
    ) {
        self.manager = manager
        self.clock = clock
        self.refreshMargin = refreshMargin
    }

    /// The token to write a batch with now. A token that is due is still handed out while a fresh one
    /// is fetched.
    func current(wake: @escaping @Sendable () -> Void) -> Availability {
        let now = clock.now()
        let (availability, fetchGeneration) = state.withLock { state -> (Availability, Int?) in
            func startFetch() -> Int? {
                guard !state.fetching, !state.shutDown else { return nil }
                state.fetching = true
                state.generation += 1
                return state.generation
            }
            if let token = state.token, now < token.expiresAt {
                let due = token.isRefreshDue(now: now, margin: refreshMargin)
                return (.token(token), due ? startFetch() : nil)
            }
            if let failure = state.failure, now.timeIntervalSince(failure.at) < Self.failureHoldTime {
                return (.failed(failure.error), nil)
            }
            state.failure = nil
            state.waiting.append(wake)
            return (.wait, startFetch())
        }
        if let fetchGeneration { fetch(generation: fetchGeneration) }
        return availability
    }

    /// Fetches a token now and keeps it: for a caller that wants one before the first batch (and to
    /// learn at once that the credentials do not work).
    func prefetch() async throws(FCMCredentialError) {
        let token = try await manager.currentToken()
        state.withLock { $0.token = token }
    }

    /// FCM answered 401 to `token`: the next batch waits for a new one.
    func tokenRejected(_ token: FCMAccessToken) {
        manager.tokenRejected(token)
        state.withLock { state in
            if state.token == token { state.token = nil }
        }
    }

    /// Waits for a fetch under way and stops fetching.
    func shutdown() async {
        let task = state.withLock { state -> Task<Void, Never>? in
            state.shutDown = true
            return state.fetch
        }
        await task?.value
    }

    private func fetch(generation: Int) {
        // A child of no task on purpose: started from an event loop; it is tracked in `state.fetch`
        // and awaited by `shutdown()`.
        let task = Task { [manager, clock] in
            let result: Result<FCMAccessToken, FCMCredentialError>
            do throws(FCMCredentialError) {
                result = .success(try await manager.currentToken())
            } catch {
                result = .failure(error)
            }
            let wakers = state.withLock { state -> [@Sendable () -> Void] in
                state.fetching = false
                state.fetch = nil
                switch result {
                case .success(let token):
                    state.token = token
                    state.failure = nil
                case .failure(let error):
                    state.failure = (error, clock.now())
                }
                defer { state.waiting.removeAll() }
                return state.waiting
            }
            for wake in wakers { wake() }
        }
        state.withLock { state in
            // Kept only while this fetch is still the one under way (it may have finished already).
            if state.fetching, state.generation == generation { state.fetch = task }
        }
    }
}
