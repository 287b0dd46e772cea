import Synchronization

/// Hands out the provider token of one team: one token shared by every connection and request,
/// refreshed inside Apple's 20–60 minute window and replaced when APNs says it expired.
///
/// Thread-safe. Signing happens under the lock, so concurrent callers that find the token due get
/// one new token between them, never one each. Holding a lock while signing is deliberate (STYLE §2
/// prefers side effects outside the lock): ES256 signing is pure CPU work of some tens of
/// microseconds, happens about once an hour, and every caller waiting on the lock needs its result
/// anyway.
public final class ProviderTokenManager: Sendable, CustomStringConvertible, CustomReflectable {
    /// How tokens are refreshed.
    public struct Configuration: Hashable, Sendable {
        /// Apple: refresh "no more than once every 20 minutes".
        public static let minimumRefreshAge: Duration = .seconds(20 * 60)
        /// Apple rejects tokens older than an hour. The longest refresh age we allow stops one minute
        /// short of it, so that a token handed out just before its refresh is still valid when the
        /// request reaches APNs.
        public static let maximumRefreshAge: Duration = .seconds(59 * 60)
        /// 50 minutes, as Pushy and apns2 use.
        public static let defaultRefreshAge: Duration = .seconds(50 * 60)

        private var storedRefreshAge: Duration

        /// The age at which a token is replaced. Always within
        /// [``minimumRefreshAge``, ``maximumRefreshAge``]: values outside are clamped. Use
        /// ``isValidRefreshAge(_:)`` to refuse them at start-up instead.
        public var refreshAge: Duration {
            get { storedRefreshAge }
            set { storedRefreshAge = Self.clamped(newValue) }
        }

        public init(refreshAge: Duration = Self.defaultRefreshAge) {
            self.storedRefreshAge = Self.clamped(refreshAge)
        }

        /// Whether `refreshAge` lies inside Apple's window (20 to 59 minutes here).
        public static func isValidRefreshAge(_ refreshAge: Duration) -> Bool {
            refreshAge >= minimumRefreshAge && refreshAge <= maximumRefreshAge
        }

        private static func clamped(_ value: Duration) -> Duration {
            min(max(value, minimumRefreshAge), maximumRefreshAge)
        }
    }

    private struct State: Sendable {
        var machine: ProviderToken.StateMachine
        var tokensMinted = 0
        var youngTokensRejected = 0
    }

    private let signer: ProviderTokenSigner
    private let clock: any WallClock
    private let state: Mutex<State>

    public init(
        signer: ProviderTokenSigner,
        configuration: Configuration = .init(),
        clock: any WallClock = SystemWallClock()
    ) {
        self.signer = signer
        self.clock = clock
        self.state = Mutex(State(machine: ProviderToken.StateMachine(configuration: configuration)))
    }

    /// The key id of the signing key.
    public var keyID: String { signer.keyID }
    /// The team whose tokens this manager hands out.
    public var teamID: String { signer.teamID }

    /// The token to put in the next request's `authorization` header; minted if there is none yet,
    /// if the current one reached the refresh age, or if APNs rejected it as expired.
    public func currentToken() throws(ProviderTokenSignerError) -> ProviderToken {
        try state.withLock { (state: inout State) throws(ProviderTokenSignerError) -> ProviderToken in
            switch state.machine.tokenRequested(now: clock.now()) {
            case .use(let token):
                return token
            case .mint(let issuedAt):
                // On failure the machine is unchanged, so the next request tries again.
                let token = try signer.sign(issuedAt: issuedAt)
                state.machine.tokenMinted(token)
                state.tokensMinted += 1
                return token
            }
        }
    }

    /// APNs answered `ExpiredProviderToken` to a request that carried `token`. The next
    /// ``currentToken()`` mints a replacement, once for any number of rejections of the same token.
    ///
    /// - Returns: what changed, so that the caller can log a token rejected while younger than 20
    ///   minutes (a clock disagreement with APNs).
    @discardableResult
    public func tokenRejectedAsExpired(_ token: ProviderToken) -> ProviderToken.StateMachine.RejectionAction {
        state.withLock { state in
            let action = state.machine.expiredTokenRejected(token: token, now: clock.now())
            if case .replaceYoungToken = action { state.youngTokensRejected += 1 }
            return action
        }
    }

    /// How many tokens this manager has signed (for metrics).
    public var tokensMinted: Int { state.withLock { $0.tokensMinted } }

    /// How many tokens APNs rejected as expired while they were younger than 20 minutes (for
    /// metrics: a non-zero value points at a wrong system clock).
    public var youngTokensRejected: Int { state.withLock { $0.youngTokensRejected } }

    public var description: String { "ProviderTokenManager(keyID: \(keyID), teamID: \(teamID))" }
    /// Keeps `dump` and debuggers away from the token and the key.
    public var customMirror: Mirror {
        Mirror(self, children: ["keyID": keyID, "teamID": teamID], displayStyle: .class)
    }
}

extension ProviderTokenManager {
    /// Whether `other` signs with the same key, key id and team (a reload that read the same `.p8` file
    /// again changes nothing).
    public func signsLike(_ other: ProviderTokenManager) -> Bool {
        keyID == other.keyID && teamID == other.teamID
            && signer.publicKey.rawRepresentation == other.signer.publicKey.rawRepresentation
    }
}
