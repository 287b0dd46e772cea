import Foundation
import Logging
import PushgateCore
import Synchronization

/// The access token the connections of one `FCMClient` write with: read on their event loops without
/// waiting, fetched through ``FCMAccessTokenManager`` (one fetch at a time) when there is none or it is
/// due, and dropped when FCM refuses it.
///
/// Outages delay, never fail (``FCMTokenFetchBackoff``): when a fetch fails for an outage of the token
/// endpoint, the connections that need a token hold their work (it stays queued in the pool, within its
/// deadline) and the next fetch waits a back-off with jitter; a timer wakes them for it. Only a definitive
/// refusal (`invalid_grant`...) is a configuration alarm, and even then nothing fails here: until the
/// next fetch is due, each batch is completed at once as held (``Availability/refused(_:)``), and the
/// dispatcher keeps its devices waiting in the ledger, within their requests' expiration.
final class FCMBearerCache: Sendable {
    enum Availability {
        case token(FCMAccessToken)
        /// The token endpoint refused the credentials; no fetch before `pause.retryAt`.
        case refused(FCMTokenFetchBackoff.Pause)
        /// None yet: the `wake` given will be called when the fetch under way ends, or when the back-off
        /// of an outage does.
        case wait
    }

    private struct State {
        var token: FCMAccessToken?
        /// A fetch is under way (its task is `fetch` once stored; `generation` tells fetches apart).
        var fetching = false
        var generation = 0
        var fetch: Task<Void, Never>?
        var backoff: FCMTokenFetchBackoff
        /// Wakes the waiters when an outage's back-off ends: armed (one at a time), told apart by
        /// `timerGeneration`, its task kept for `shutdown()`.
        var timerArmed = false
        var timerGeneration = 0
        var timer: Task<Void, Never>?
        var waiting: [@Sendable () -> Void] = []
        var shutDown = false
    }

    private let manager: FCMAccessTokenManager
    private let clock: any WallClock
    private let refreshMargin: Duration
    private let logger: Logger
    private let random = Mutex(SystemRandomNumberGenerator())
    private let state: Mutex<State>

    init(
        manager: FCMAccessTokenManager,
        clock: any WallClock,
        refreshMargin: Duration = FCMAccessToken.StateMachine.defaultRefreshMargin,
        backoff: FCMTokenFetchBackoff.Configuration = .init(),
        logger: Logger = Logger(label: "pushgate.fcm")
    ) {
        self.manager = manager
        self.clock = clock
        self.refreshMargin = refreshMargin
        self.logger = logger
        self.state = Mutex(State(backoff: FCMTokenFetchBackoff(configuration: backoff)))
    }

    /// The token to write a batch with now. A token that is due is still handed out while a fresh one
    /// is fetched.
    func current(wake: @escaping @Sendable () -> Void) -> Availability {
        let now = clock.now()
        let (availability, fetchGeneration, timer) = state.withLock {
            state -> (Availability, Int?, (generation: Int, delay: Duration)?) in
            func startFetch() -> Int? {
                guard !state.fetching, !state.shutDown else { return nil }
                state.fetching = true
                state.generation += 1
                return state.generation
            }
            if let token = state.token, now < token.expiresAt {
                let due = token.isRefreshDue(now: now, margin: refreshMargin)
                return (.token(token), due && state.backoff.mayRefresh(now: now) ? startFetch() : nil, nil)
            }
            switch state.backoff.decide(now: now) {
            case .refused(let pause):
                return (.refused(pause), nil, nil)
            case .wait(let until):
                state.waiting.append(wake)
                guard !state.timerArmed, !state.shutDown else { return (.wait, nil, nil) }
                state.timerArmed = true
                state.timerGeneration += 1
                return (.wait, nil, (state.timerGeneration, .seconds(max(0, until.timeIntervalSince(now)))))
            case .fetch:
                state.waiting.append(wake)
                return (.wait, startFetch(), nil)
            }
        }
        if let fetchGeneration { fetch(generation: fetchGeneration) }
        if let timer { startTimer(generation: timer.generation, after: timer.delay) }
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

    /// The definitive refusal in force (the last fetch was refused), if any: a configuration alarm.
    var refusal: FCMTokenFetchBackoff.Pause? { state.withLock { $0.backoff.alarm } }

    /// Waits for a fetch under way and stops fetching.
    func shutdown() async {
        let (task, timer) = state.withLock { state -> (Task<Void, Never>?, Task<Void, Never>?) in
            state.shutDown = true
            state.timerArmed = false
            defer { state.timer = nil }
            return (state.fetch, state.timer)
        }
        timer?.cancel()
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
            let now = clock.now()
            let (wakers, report) = state.withLock { state -> ([@Sendable () -> Void], Report) in
                state.fetching = false
                state.fetch = nil
                let report: Report
                switch result {
                case .success(let token):
                    state.token = token
                    report = .succeeded(state.backoff.fetchSucceeded())
                case .failure(let error):
                    report = .failed(random.withLock { state.backoff.fetchFailed(error, now: now, using: &$0) })
                }
                // Every waiter asks again: with a token it writes; after an outage it waits for the back-off
                // (and the first to ask starts its timer); after a refusal it completes its batch as held.
                defer { state.waiting.removeAll() }
                return (state.waiting, report)
            }
            log(report, now: now)
            for wake in wakers { wake() }
        }
        state.withLock { state in
            // Kept only while this fetch is still the one under way (it may have finished already).
            if state.fetching, state.generation == generation { state.fetch = task }
        }
    }

    /// Wakes the waiters when an outage's back-off ends; they ask again, and the first starts the fetch.
    private func startTimer(generation: Int, after delay: Duration) {
        // A child of no task on purpose, as `fetch`: tracked in `state.timer`, cancelled by `shutdown()`.
        let timer = Task { [self] in
            try? await Task.sleep(for: delay)
            let wakers = state.withLock { state -> [@Sendable () -> Void] in
                if state.timerGeneration == generation {
                    state.timerArmed = false
                    state.timer = nil
                }
                defer { state.waiting.removeAll() }
                return state.waiting
            }
            for wake in wakers { wake() }
        }
        state.withLock { state in
            // Kept only while it is still the one armed (it may have fired already).
            if state.timerArmed, state.timerGeneration == generation { state.timer = timer }
        }
    }

    private enum Report {
        case succeeded(FCMTokenFetchBackoff.SuccessTransition)
        case failed(FCMTokenFetchBackoff.FailureTransition)
    }

    /// One warning when an outage begins or the alarm is raised, one info line when it ends; the failures in
    /// between at debug level. The error's description and detail are safe (status and OAuth code only).
    private func log(_ report: Report, now: Date) {
        func metadata(_ pause: FCMTokenFetchBackoff.Pause) -> Logger.Metadata {
            [
                "fcm.token_error": "\(pause.error)", "fcm.token_error_detail": "\(pause.error.safeDetail ?? "")",
                "fcm.token_failures": "\(pause.failures)",
                "fcm.token_retry_in_s": "\(String(format: "%.1f", pause.retryAt.timeIntervalSince(now)))",
            ]
        }
        switch report {
        case .succeeded(.none):
            break
        case .succeeded(.recovered(let failures, let since, let wasRefusal)):
            logger.info(
                wasRefusal
                    ? "FCM token endpoint accepts the credentials again: configuration alarm cleared; held devices are sent"
                    : "FCM token endpoint answers again; the sends that waited go out",
                metadata: [
                    "fcm.token_failures": "\(failures)",
                    "fcm.token_outage_s": "\(String(format: "%.1f", now.timeIntervalSince(since)))",
                ]
            )
        case .failed(.outageBegan(let pause)):
            logger.warning(
                "FCM token endpoint unavailable; sends wait for a token and the fetch is retried with back-off",
                metadata: metadata(pause)
            )
        case .failed(.alarmRaised(let pause)):
            logger.error(
                "configuration alarm: FCM token endpoint refused the service account's credentials; devices wait (until their request expires) and are not pruned; fix the service account and reload",
                metadata: metadata(pause)
            )
        case .failed(.persists(let pause)):
            logger.debug("FCM access token fetch failed again", metadata: metadata(pause))
        }
    }
}
