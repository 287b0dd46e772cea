import Foundation
import PushTransport
import PushgateCore
import Synchronization
import WebPush

/// The VAPID side of one client: its key and subject, and the token of each origin
/// (``VAPIDTokenCache``, signed on first use, refreshed before `exp`, dropped when refused). Shared by
/// every connection of every origin; read once per batch (HTTP/2) or message (HTTP/1.1). A reload
/// replaces the key and subject (``renew(key:subject:)``): every origin's token is signed again with them
/// for the next message. Also where the connections reach the client's metrics (every answer passes here).
final class WebPushVAPIDCredentials: Sendable {
    let metrics: WebPushClientMetrics
    private let clock: any WallClock
    private let state: Mutex<State>

    private struct State {
        var key: VAPIDKey
        var subject: VAPIDSubject
        var cache: VAPIDTokenCache
        var signatures = 0
    }

    init(
        key: VAPIDKey,
        subject: VAPIDSubject,
        cache: VAPIDTokenCache.Configuration,
        clock: any WallClock,
        metrics: WebPushClientMetrics = .disabled
    ) {
        self.metrics = metrics
        self.clock = clock
        state = Mutex(State(key: key, subject: subject, cache: VAPIDTokenCache(configuration: cache)))
    }

    /// The key and subject tokens are signed with now.
    var current: (key: VAPIDKey, subject: VAPIDSubject) { state.withLock { ($0.key, $0.subject) } }

    /// From now on tokens are signed with `key` and `subject`: every origin's cached token is dropped, so
    /// the next message to it carries a new one. A message whose headers were already written keeps the
    /// token it was written with.
    func renew(key: VAPIDKey, subject: VAPIDSubject) {
        state.withLock { state in
            state.key = key
            state.subject = subject
            state.cache.credentialsChanged()
        }
    }

    /// The `Authorization` value for a message to `origin` now, signing a token when there is none.
    func authorization(for origin: WebPushOrigin) -> String {
        let now = clock.now()
        let (authorization, signed) = state.withLock { state -> (String, Bool) in
            switch state.cache.lookup(origin, now: now) {
            case .use(let authorization):
                return (authorization, false)
            case .sign(let expiresAt):
                // Signed under the lock: one signature per origin when many connections ask at once.
                let token = VAPIDToken(
                    key: state.key,
                    subject: state.subject,
                    audience: origin,
                    expiresAt: expiresAt
                )
                state.cache.signed(token, now: now)
                state.signatures += 1
                return (token.authorization, true)
            }
        }
        if signed { metrics.vapidSignatures.increment() }
        return authorization
    }

    /// `origin` refused `authorization` (401/403): the next message signs a new token, unless one
    /// already replaced the refused one (several messages in flight are refused together).
    func refused(_ authorization: String, for origin: WebPushOrigin) {
        let now = clock.now()
        state.withLock { state in
            guard case .use(let current) = state.cache.lookup(origin, now: now), current == authorization else {
                return
            }
            state.cache.tokenRefused(for: origin)
        }
    }

    /// Tokens signed so far (for tests and metrics).
    var signatures: Int { state.withLock { $0.signatures } }

    /// What an answer means for its message: a 401/403 drops the origin's token and resends the message
    /// once with a fresh one (a token refused for its age or a clock that disagrees recovers); refused
    /// again, the message completes as a configuration alarm. Everything else completes as classified.
    func disposition(
        of pooled: WebPushPooledRequest,
        status: Int,
        retryAfter: String?,
        authorization: String
    ) -> HTTP2PushStreamDisposition<WebPushPooledRequest, WebPushOutcome> {
        metrics.answered(status: status)
        let answer = WebPushAnswer.classify(status: status, retryAfter: retryAfter, now: clock.now())
        if case .configurationAlarm = answer {
            refused(authorization, for: pooled.request.origin)
            if !pooled.resentAfterRefusedToken {
                var again = pooled
                again.resentAfterRefusedToken = true
                metrics.resent(.vapidRefused)
                return .requeue(again, because: .credentialRefused)
            }
        }
        return .complete(.answered(answer))
    }
}
