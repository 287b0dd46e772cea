import Crypto
import Foundation
import _CryptoExtras

extension FCMSimulatorCore {
    static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    static let acceptedScopes: Set<String> = [
        "https://www.googleapis.com/auth/firebase.messaging", "https://www.googleapis.com/auth/cloud-platform",
    ]
    /// Google's token endpoint: documented as the `aud` of every assertion, and the one google-auth
    /// always uses, whatever the file's `token_uri`. The simulator's own URI is accepted as well.
    static let googleTokenURI = "https://oauth2.googleapis.com/token"
    /// Clock skew allowed on `iat`, as Google's endpoint tolerates a little.
    static let allowedSkew: TimeInterval = 300

    /// `POST /token`: Google's JWT-bearer grant (developers.google.com/identity/protocols/oauth2/service-account).
    /// Checks the form, the RS256 signature against the named account's public key, and the claims.
    func token(_ request: FCMSimulatorRequest) -> FCMSimulatorResponse {
        let now = self.now()
        let faults = state.withLock { state -> FCMTokenEndpointFaults? in
            state.stats.tokenRequests += 1
            let faults = state.tokenFaults?.inForce(now: now)
            if faults?.answer != nil { state.stats.tokenFaultAnswers += 1 }
            return faults
        }
        var response = faults?.answer ?? grant(request)
        response.extraLatencyMilliseconds = faults?.latencyMilliseconds ?? 0
        return response
    }

    private func grant(_ request: FCMSimulatorRequest) -> FCMSimulatorResponse {
        let form = Self.parseForm(request.body)
        guard form["grant_type"] == Self.grantType else {
            return .oauthError("unsupported_grant_type", "Invalid grant_type: \(form["grant_type"] ?? "")")
        }
        guard let assertion = form["assertion"] else { return .oauthError("invalid_request", "Missing assertion.") }
        switch verify(assertion) {
        case .success(let account):
            let token = issueAccessToken(for: account)
            return .json(200, ["access_token": token, "expires_in": accessTokenLifetime, "token_type": "Bearer"])
        case .failure(let problem):
            return .oauthError("invalid_grant", problem.text)
        }
    }

    struct Problem: Error { var text: String }

    private func verify(_ jwt: String) -> Result<FCMSimulatorAccount, Problem> {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = Self.decodeObject(parts[0]), let claims = Self.decodeObject(parts[1]),
            let signature = Self.base64URL(parts[2])
        else { return .failure(Problem(text: "Invalid JWT: not three base64url JSON parts.")) }
        guard header["alg"] as? String == "RS256" else {
            return .failure(Problem(text: "Invalid JWT: alg must be RS256."))
        }
        let (accounts, tokenURI) = state.withLock { ($0.accounts, $0.tokenURI) }
        guard let issuer = claims["iss"] as? String, let account = accounts[issuer] else {
            return .failure(Problem(text: "Invalid JWT: iss is not a known service account."))
        }
        if let keyID = account.keyID, header["kid"] as? String != keyID {
            return .failure(Problem(text: "Invalid JWT: kid does not name the account's key."))
        }
        let input = Array(jwt.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard
            account.publicKey.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature),
                for: SHA256.hash(data: input),
                padding: .insecurePKCS1v1_5
            )
        else { return .failure(Problem(text: "Invalid JWT Signature.")) }
        guard let audience = claims["aud"] as? String, audience == tokenURI || audience == Self.googleTokenURI else {
            return .failure(Problem(text: "Invalid JWT: aud must be \(tokenURI) or \(Self.googleTokenURI)."))
        }
        let scopes = Set((claims["scope"] as? String ?? "").split(separator: " ").map(String.init))
        guard !scopes.isDisjoint(with: Self.acceptedScopes) else {
            return .failure(Problem(text: "Invalid JWT: scope does not allow FCM."))
        }
        guard let iat = (claims["iat"] as? NSNumber)?.doubleValue, let exp = (claims["exp"] as? NSNumber)?.doubleValue
        else { return .failure(Problem(text: "Invalid JWT: iat and exp are required.")) }
        let now = self.now().timeIntervalSince1970
        guard exp > iat, exp - iat <= 3600 else {
            return .failure(Problem(text: "Invalid JWT: exp must be after iat and at most one hour later."))
        }
        guard iat <= now + Self.allowedSkew, exp > now else {
            return .failure(
                Problem(text: "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe.")
            )
        }
        return .success(account)
    }

    static func parseForm(_ body: [UInt8]) -> [String: String] {
        var form: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String {
                String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(text)
            }
            form[decode(kv[0])] = kv.count == 2 ? decode(kv[1]) : ""
        }
        return form
    }

    static func base64URL(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }

    static func decodeObject(_ text: Substring) -> [String: Any]? {
        base64URL(text).flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
    }
}
