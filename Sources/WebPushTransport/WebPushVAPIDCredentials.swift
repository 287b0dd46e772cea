import Foundation
import PushTransport
import PushgateCore
import Synchronization
import WebPush

/// The VAPID side of one client: its key and subject, and the token of each origin
/// (``VAPIDTokenCache``, signed on first use, refreshed before `exp`, dropped when refused). Shared by
/// every connection of every origin; read once per batch (HTTP/2) or message (HTTP/1.1).
final class WebPushVAPIDCredentials: Sendable {
    let key: VAPIDKey
    let subject: VAPIDSubject
    private let clock: any WallClock
    private let state: Mutex<(cache: VAPIDTokenCache, signatures: Int)>

    init(key: VAPIDKey, subject: VAPIDSubject, cache: VAPIDTokenCache.Configuration, clock: any WallClock) {
        self.key = key
        self.subject = subject
        self.clock = clock
        state = Mutex((VAPIDTokenCache(configuration: cache), 0))
    }

    /// The `Authorization` value for a message to `origin` now, signing a token when there is none.
    func authorization(for origin: WebPushOrigin) -> String {
        let now = clock.now()
        return state.withLock { state in
            switch state.cache.lookup(origin, now: now) {
            case .use(let authorization):
                return authorization
            case .sign(let expiresAt):
                // Signed under the lock: one signature per origin when many connections ask at once.
                let token = VAPIDToken(key: key, subject: subject, audience: origin, expiresAt: expiresAt)
                state.cache.signed(token, now: now)
                state.signatures += 1
                return token.authorization
            }
        }
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
        let answer = WebPushAnswer.classify(status: status, retryAfter: retryAfter, now: clock.now())
        if case .configurationAlarm = answer {
            refused(authorization, for: pooled.request.origin)
            if !pooled.resentAfterRefusedToken {
                var again = pooled
                again.resentAfterRefusedToken = true
                return .requeue(again, because: .credentialRefused)
            }
        }
        return .complete(.answered(answer))
    }
}
