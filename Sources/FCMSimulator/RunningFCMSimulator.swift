import Foundation

/// A simulator that is running: where it listens, its CA, and the control API's operations. Thread-safe.
public final class RunningFCMSimulator: Sendable {
    public let host: String
    public let port: Int
    public let controlPort: Int?
    /// The CA certificate (PEM) that signed the server certificate, and where it was written.
    public let caCertificatePEM: String
    public let caCertificatePath: String

    let core: FCMSimulatorCore

    init(
        host: String,
        port: Int,
        controlPort: Int?,
        caCertificatePEM: String,
        caCertificatePath: String,
        core: FCMSimulatorCore
    ) {
        self.host = host
        self.port = port
        self.controlPort = controlPort
        self.caCertificatePEM = caCertificatePEM
        self.caCertificatePath = caCertificatePath
        self.core = core
    }

    /// `https://host:port/token`: the `token_uri` of service accounts that use this simulator.
    public var tokenURI: String { "https://\(host):\(port)/token" }

    /// Teaches the token endpoint a service account.
    public func register(_ account: FCMSimulatorAccount) {
        core.state.withLock { $0.accounts[account.clientEmail] = account }
    }

    /// Makes a throwaway service account pointing at this simulator and registers it.
    public func makeServiceAccount(projectID: String = "pushgate-simulated") throws -> FCMThrowawayServiceAccount {
        let account = try FCMThrowawayServiceAccount(projectID: projectID, tokenURI: tokenURI)
        register(account.account)
        return account
    }

    /// Accepted messages, oldest first; optionally for one registration token.
    public func messages(token: String? = nil) -> [FCMAcceptedMessage] { core.messages(token: token) }
    public func stats() -> FCMSimulatorStats { core.state.withLock { $0.stats } }
    /// Later sends to `token` answer 404 UNREGISTERED.
    public func markUnregistered(_ token: String) { core.state.withLock { _ = $0.unregistered.insert(token) } }
    /// Answers `error` to the next sends (after the bearer check).
    public func inject(_ error: FCMInjectedError) { core.inject(error) }
    /// Every access token issued so far expires now: the next send with one answers 401.
    public func expireAccessTokens() { core.expireAccessTokens() }
    /// Every access token issued so far is revoked: sends with one answer 401; a fresh one works.
    public func revokeAccessTokens() { core.revokeAccessTokens() }
    /// Sets the token endpoint's faults (replacing any): in force now, or once `afterAccepted` more
    /// messages have been accepted; for their `duration`, or until cleared.
    public func setTokenEndpointFaults(_ faults: FCMTokenEndpointFaults) { core.setTokenFaults(faults) }
    public func clearTokenEndpointFaults() { core.clearTokenFaults() }
    /// While true, every send answers 401 UNAUTHENTICATED, even with a freshly issued access token.
    public func refuseAccessTokens(_ refuse: Bool = true) { core.refuseAccessTokens(refuse) }
    /// Holds every later answer of the TLS port (token endpoint and `messages:send`) this long.
    public func setLatency(milliseconds: Int) { core.setLatency(milliseconds: milliseconds) }
    public var latencyMilliseconds: Int { core.latencyMilliseconds }
    /// Forgets messages, access tokens, device states, injected errors, token-endpoint faults and counters
    /// (not accounts).
    public func reset() { core.reset() }
}
