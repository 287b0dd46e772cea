public import PushgateCore

/// Where a token-authenticated connection gets its `authorization: bearer` value.
///
/// One token per team, reused for 20 to 60 minutes (Apple's window); the implementation decides when
/// to mint a new one. The client never logs the value.
public protocol APNsProviderTokenSource: Sendable {
    /// The token to send now.
    func providerToken() throws -> ProviderToken
    /// APNs answered `ExpiredProviderToken` to a request that carried `token`: mint a new one unless
    /// that already happened.
    func providerTokenRejectedAsExpired(_ token: ProviderToken)
}

extension ProviderTokenManager: APNsProviderTokenSource {
    public func providerToken() throws -> ProviderToken {
        try currentToken()
    }

    public func providerTokenRejectedAsExpired(_ token: ProviderToken) {
        tokenRejectedAsExpired(token)
    }
}
