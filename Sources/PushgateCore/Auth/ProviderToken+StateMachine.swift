public import Foundation

extension ProviderToken {
    /// Decides when to mint a provider token, following Apple's rules: reuse one token per team,
    /// refresh it no more than once every 20 minutes and no less than once every 60, and replace it
    /// when APNs answers `ExpiredProviderToken`.
    ///
    /// Pure: it reads no clock (every event carries `now`), holds no lock and signs nothing. The
    /// owner (``ProviderTokenManager``) carries out ``RequestAction/mint(issuedAt:)`` by signing, then
    /// reports the new token with ``tokenMinted(_:)``.
    ///
    /// Minting is lazy: a rejected token is marked, and the next request mints. So a burst of
    /// rejections of one token mints one replacement, and rejections of a token that was already
    /// replaced change nothing.
    public struct StateMachine: Sendable {
        /// What to do for a request that needs a token.
        public enum RequestAction: Hashable, Sendable {
            /// Use this token.
            case use(ProviderToken)
            /// Sign a new token issued at this time, then report it with ``StateMachine/tokenMinted(_:)``.
            case mint(issuedAt: Date)
        }

        /// What an `ExpiredProviderToken` answer changed.
        public enum RejectionAction: Hashable, Sendable {
            /// The rejected token was the one in use; the next request mints its replacement.
            case replace
            /// As ``replace``, but the token was younger than Apple's 20-minute minimum: APNs' clock
            /// and ours disagree (or the key was revoked and re-issued). It is replaced anyway, since a
            /// request carrying it cannot succeed; the caller should log it.
            case replaceYoungToken(age: Duration)
            /// The rejected token had already been replaced (or was never ours): nothing changes, and
            /// the next request uses the current token.
            case alreadyReplaced
        }

        private enum State: Sendable {
            /// No token minted yet.
            case idle
            /// `token` is in use.
            case active(ProviderToken)
            /// APNs rejected `token` as expired; the next request mints.
            case rejected(ProviderToken)
        }

        /// Apple: refresh "no more than once every 20 minutes".
        public static let minimumRefreshAge = ProviderTokenManager.Configuration.minimumRefreshAge

        private var state: State = .idle
        /// The age at which the token in use is replaced, within Apple's window.
        public let refreshAge: Duration

        public init(configuration: ProviderTokenManager.Configuration = .init()) {
            self.refreshAge = configuration.refreshAge
        }

        /// The token in use, if any (rejected tokens are not).
        public var currentToken: ProviderToken? {
            if case .active(let token) = state { return token }
            return nil
        }

        /// A request needs a token at `now`.
        ///
        /// The token in use is reused until it is ``refreshAge`` old (at least 20 minutes, whatever
        /// the configuration says). A clock that went backwards makes a token look younger: it is
        /// reused, not re-minted.
        public mutating func tokenRequested(now: Date) -> RequestAction {
            switch state {
            case .idle, .rejected:
                return .mint(issuedAt: now)
            case .active(let token):
                return token.age(at: now) >= refreshAge ? .mint(issuedAt: now) : .use(token)
            }
        }

        /// A token was signed after ``RequestAction/mint(issuedAt:)``; it becomes the one in use.
        public mutating func tokenMinted(_ token: ProviderToken) {
            state = .active(token)
        }

        /// APNs answered `ExpiredProviderToken` (403) to a request that carried `token`.
        public mutating func expiredTokenRejected(token: ProviderToken, now: Date) -> RejectionAction {
            guard case .active(let current) = state, current == token else {
                // Already marked, replaced by a newer token, or not ours.
                return .alreadyReplaced
            }
            state = .rejected(token)
            let age = token.age(at: now)
            return age < Self.minimumRefreshAge ? .replaceYoungToken(age: age) : .replace
        }
    }
}
