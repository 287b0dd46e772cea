public import AsyncHTTPClient
public import Foundation
public import NIOCore
public import PushgateCore

/// Trades a signed assertion for an access token at the service account's `token_uri`, with
/// AsyncHTTPClient. This is the only use of it: sends to FCM go through the transport layer's HTTP/2
/// pool, never through here.
///
/// Failures carry a safe detail (the HTTP status and OAuth `error` code, or the error's type), never the
/// assertion, the token or the endpoint's prose. Only a definitive refusal, 400 or 401 with one of
/// OAuth's error codes (RFC 6749 §5.2: `invalid_grant` for a revoked or unknown key, `invalid_client`...),
/// is ``FCMCredentialError/exchangeRefused``; everything else (5xx, 429, a timeout, a dropped connection,
/// a 4xx that is not OAuth's, such as a proxy's page) is ``FCMCredentialError/exchangeFailed``, an outage.
public struct FCMTokenExchanger: FCMTokenExchanging {
    /// Token answers are small; anything bigger is not one.
    static let maximumAnswerBytes = 64 * 1024
    /// OAuth's error codes of a token request (RFC 6749 §5.2): the request or the credentials are wrong,
    /// and sending the same again gets the same answer.
    static let refusals: Set<String> = [
        "invalid_request", "invalid_client", "invalid_grant", "unauthorized_client", "unsupported_grant_type",
        "invalid_scope",
    ]

    private let client: HTTPClient
    private let timeout: TimeAmount

    /// - Parameter client: owned by the caller, who shuts it down.
    public init(client: HTTPClient, timeout: TimeAmount = .seconds(10)) {
        self.client = client
        self.timeout = timeout
    }

    public func exchange(assertion: String, tokenURI: URL) async throws(FCMCredentialError) -> FCMTokenGrant {
        var request = HTTPClientRequest(url: tokenURI.absoluteString)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "accept", value: "application/json")
        request.body = .bytes(FCMAssertionSigner.tokenRequestBody(assertion: assertion))
        let status: UInt
        let body: [UInt8]
        do {
            let response = try await client.execute(request, timeout: timeout)
            status = response.status.code
            body = Array(buffer: try await response.body.collect(upTo: Self.maximumAnswerBytes))
        } catch {
            throw .exchangeFailed(detail: String(describing: type(of: error)))
        }
        guard status == 200 else {
            let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
            let oauthError = object?["error"] as? String
            let detail = "status \(status)" + (oauthError.map { " \($0.prefix(40))" } ?? "")
            if status == 400 || status == 401, let oauthError, Self.refusals.contains(oauthError) {
                throw .exchangeRefused(detail: detail)
            }
            throw .exchangeFailed(detail: detail)
        }
        return try FCMTokenGrant(jsonBytes: body)
    }
}
