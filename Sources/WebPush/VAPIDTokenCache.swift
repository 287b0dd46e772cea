public import Foundation
public import PushgateCore

/// Which VAPID token each origin gets: one per origin, signed when first needed, used until
/// `refreshMargin` before it expires, then replaced. Pure state: the caller passes the time and signs
/// when told to (``lookup(_:now:)`` → ``Lookup/sign(expiresAt:)``, then ``signed(_:)``), or lets
/// ``authorization(for:now:key:subject:)`` do both.
///
/// A token is never used when its `exp` is more than 24 hours ahead of now (a clock that went back),
/// nor once it is within the margin of expiring: a push service comparing with its own clock must
/// still find it valid.
public struct VAPIDTokenCache: Sendable {
    public struct Configuration: Hashable, Sendable {
        /// `exp` - now at signing. At most 24 h (RFC 8292); 12 h leaves room for clocks that disagree.
        public var lifetime: Duration = .seconds(12 * 3600)
        /// Re-sign this long before `exp`.
        public var refreshMargin: Duration = .seconds(3600)
        /// Origins kept; beyond this, expired entries go first, then the soonest to expire.
        public var maximumOrigins = 10_000

        public init() {}

        /// Refuses a lifetime over 24 h, or a margin that leaves no useful life.
        public func validated() throws(VAPIDCacheConfigurationError) -> Self {
            guard lifetime > .zero, lifetime <= .seconds(VAPIDToken.maximumLifetimeSeconds) else {
                throw VAPIDCacheConfigurationError(key: "lifetime", problem: "must be more than 0 and at most 24 h")
            }
            guard refreshMargin >= .zero, refreshMargin < lifetime else {
                throw VAPIDCacheConfigurationError(
                    key: "refreshMargin",
                    problem: "must be at least 0 and below lifetime"
                )
            }
            guard maximumOrigins > 0 else {
                throw VAPIDCacheConfigurationError(key: "maximumOrigins", problem: "must be at least 1")
            }
            return self
        }
    }

    public enum Lookup: Hashable, Sendable {
        /// A valid token: send with this `Authorization` value.
        case use(authorization: String)
        /// None, or due for refresh: sign one expiring then and hand it to ``signed(_:)``.
        case sign(expiresAt: Date)
    }

    public let configuration: Configuration
    private var tokens: [WebPushOrigin: VAPIDToken] = [:]

    public init(configuration: Configuration = .init()) {
        self.configuration = configuration
    }

    public var count: Int { tokens.count }

    public func lookup(_ origin: WebPushOrigin, now: Date) -> Lookup {
        if let token = tokens[origin], isUsable(token, now: now) { return .use(authorization: token.authorization) }
        return .sign(expiresAt: now.addingTimeInterval(Self.seconds(configuration.lifetime)))
    }

    /// Keeps a freshly signed token for its origin (replacing the one it refreshes).
    public mutating func signed(_ token: VAPIDToken, now: Date) {
        tokens[token.audience] = token
        guard tokens.count > configuration.maximumOrigins else { return }
        tokens = tokens.filter { isUsable($0.value, now: now) || $0.key == token.audience }
        while tokens.count > configuration.maximumOrigins,
            let soonest = tokens.filter({ $0.key != token.audience }).min(by: {
                $0.value.expiresAt < $1.value.expiresAt
            })
        {
            tokens[soonest.key] = nil
        }
    }

    /// The key or subject changed: every token is signed again.
    public mutating func credentialsChanged() { tokens = [:] }

    /// The push service refused the token (401/403): the next message to that origin signs a new one.
    public mutating func tokenRefused(for origin: WebPushOrigin) { tokens[origin] = nil }

    /// The `Authorization` value for `origin` at `now`, signing (and keeping) a token when needed.
    public mutating func authorization(
        for origin: WebPushOrigin,
        now: Date,
        key: VAPIDKey,
        subject: VAPIDSubject
    ) -> String {
        switch lookup(origin, now: now) {
        case .use(let authorization):
            return authorization
        case .sign(let expiresAt):
            let token = VAPIDToken(key: key, subject: subject, audience: origin, expiresAt: expiresAt)
            signed(token, now: now)
            return token.authorization
        }
    }

    private func isUsable(_ token: VAPIDToken, now: Date) -> Bool {
        let left = token.expiresAt.timeIntervalSince(now)
        return left > Self.seconds(configuration.refreshMargin) && left <= Double(VAPIDToken.maximumLifetimeSeconds)
    }

    private static func seconds(_ duration: Duration) -> TimeInterval {
        let (seconds, attoseconds) = duration.components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}

/// A ``VAPIDTokenCache/Configuration`` setting out of range, by name.
public struct VAPIDCacheConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    public let key: String
    public let problem: String
    public var description: String { "webpush VAPID cache: \(key) \(problem)" }
}
