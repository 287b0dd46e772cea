public import Foundation

extension FCMAccessToken {
    /// Decides when to fetch an access token: one token per service account, fetched on first use,
    /// refreshed ``refreshMargin`` before it expires (or half-way through a shorter life), one fetch at a time, and replaced when FCM answers
    /// 401 to a request that carried it.
    ///
    /// Pure: every event carries `now`; it signs and sends nothing. The owner
    /// (``FCMAccessTokenManager``) carries out ``RequestAction/fetch(issuedAt:)``, then reports
    /// ``fetchSucceeded(_:)`` or ``fetchFailed(now:)``; it parks requests told to ``RequestAction/wait``
    /// and resumes them with the result of the fetch in flight.
    public struct StateMachine: Sendable {
        public enum RequestAction: Hashable, Sendable {
            /// Use this token.
            case use(FCMAccessToken)
            /// Sign an assertion issued at this time and exchange it; then report the result.
            case fetch(issuedAt: Date)
            /// A fetch is in flight and there is no valid token: wait for its result.
            case wait
        }

        /// What a 401 answer changed.
        public enum RejectionAction: Hashable, Sendable {
            /// The rejected token was the one in use; the next request fetches a new one.
            case refresh
            /// The token had already been replaced (or a fetch is under way): nothing changes.
            case alreadyReplaced
        }

        private enum State: Sendable {
            case idle
            case active(FCMAccessToken)
            /// A fetch is in flight; `previous` (still valid, but due) is used meanwhile.
            case fetching(previous: FCMAccessToken?)
        }

        /// Google's libraries refresh a few minutes ahead; five minutes leaves room for slow clocks.
        public static let defaultRefreshMargin: Duration = .seconds(300)

        private var state: State = .idle
        public let refreshMargin: Duration

        public init(refreshMargin: Duration = Self.defaultRefreshMargin) {
            self.refreshMargin = refreshMargin
        }

        /// The token in use, if any.
        public var currentToken: FCMAccessToken? {
            switch state {
            case .active(let token): token
            case .fetching(let previous): previous
            case .idle: nil
            }
        }

        /// A request needs a token at `now`.
        public mutating func tokenRequested(now: Date) -> RequestAction {
            switch state {
            case .idle:
                state = .fetching(previous: nil)
                return .fetch(issuedAt: now)
            case .active(let token):
                guard isDue(token, now: now) else { return .use(token) }
                // The request that finds the token due fetches its successor; the others keep using
                // the old token while it is valid.
                state = .fetching(previous: isValid(token, now: now) ? token : nil)
                return .fetch(issuedAt: now)
            case .fetching(let previous):
                if let previous, isValid(previous, now: now) { return .use(previous) }
                return .wait
            }
        }

        /// The fetch started by `.fetch` produced `token`.
        public mutating func fetchSucceeded(_ token: FCMAccessToken) {
            state = .active(token)
        }

        /// The fetch failed. A still-valid previous token stays in use; otherwise the next request
        /// fetches again.
        public mutating func fetchFailed(now: Date) {
            if case .fetching(let previous?) = state, isValid(previous, now: now) {
                state = .active(previous)
            } else {
                state = .idle
            }
        }

        /// FCM answered 401 UNAUTHENTICATED to a request that carried `token`.
        public mutating func tokenRejected(_ token: FCMAccessToken) -> RejectionAction {
            switch state {
            case .active(let current) where current == token:
                state = .idle
                return .refresh
            case .fetching(let previous?) where previous == token:
                state = .fetching(previous: nil)
                return .alreadyReplaced
            default:
                return .alreadyReplaced
            }
        }

        private func isValid(_ token: FCMAccessToken, now: Date) -> Bool { now < token.expiresAt }
        private func isDue(_ token: FCMAccessToken, now: Date) -> Bool {
            token.isRefreshDue(now: now, margin: refreshMargin)
        }
    }
}
