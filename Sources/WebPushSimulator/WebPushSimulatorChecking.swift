import Foundation

/// What the simulator checks of each push message with cryptography, decided per message: everything
/// (`decryptEvery` 1, the checking mode: every VAPID token's signature verified, every message decrypted),
/// or what a real push service checks plus a sample (`decryptEvery` N > 1: a token's signature verified
/// once per origin and distinct `Authorization` header, as a service verifies it once per connection
/// until the header changes, its `exp` still checked on every message; every Nth message decrypted, so
/// that wrong encryption still fails a run). Holds no clock: `now` is passed in.
struct WebPushSimulatorChecking: Sendable {
    /// Above this many verified headers the cache is emptied (a sender signs a token per origin and
    /// key every few hours: many distinct headers mean a test sending odd ones).
    static let cachedTokenLimit = 1_024

    private struct TokenKey: Hashable {
        var originIndex: Int
        var header: String
    }

    let decryptEvery: Int
    private var messages = 0
    private var verified: [TokenKey: SimulatorVAPIDVerifier.Verified] = [:]

    init(decryptEvery: Int = 1) {
        precondition(decryptEvery >= 1, "decryptEvery must be at least 1")
        self.decryptEvery = decryptEvery
    }

    /// A message arrived: whether it is decrypted (the 1st, the (N+1)th, ...).
    mutating func messageArrived() -> Bool {
        defer { messages += 1 }
        return messages % decryptEvery == 0
    }

    /// The earlier verification of exactly this header on this origin, while its `exp` is still ahead of
    /// `now`; nil when it must be verified (always in the checking mode).
    func verifiedToken(header: String?, originIndex: Int, now: Date) -> SimulatorVAPIDVerifier.Verified? {
        guard decryptEvery > 1, let header, let known = verified[TokenKey(originIndex: originIndex, header: header)]
        else { return nil }
        return known.expiresAt > Int64(now.timeIntervalSince1970.rounded(.down)) ? known : nil
    }

    /// `header` verified on `originIndex`: later messages with it skip the signature (not in the
    /// checking mode).
    mutating func tokenVerified(_ token: SimulatorVAPIDVerifier.Verified, header: String, originIndex: Int) {
        guard decryptEvery > 1 else { return }
        if verified.count >= Self.cachedTokenLimit { verified.removeAll() }
        verified[TokenKey(originIndex: originIndex, header: header)] = token
    }
}
