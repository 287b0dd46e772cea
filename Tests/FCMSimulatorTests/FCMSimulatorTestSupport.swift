import APNsSimulator
import Crypto
import FCMSimulator
import Foundation
import PushgateCore
import Testing
import _CryptoExtras

/// A simulator with a throwaway service account and a connected HTTP/2 client (NIO's, through the
/// APNs simulator's probe).
struct FCMFixture {
    let simulator: RunningFCMSimulator
    let account: FCMThrowawayServiceAccount
    let probe: SimulatorProbe

    static func with<Result: Sendable>(
        _ configuration: FCMSimulator.Configuration = .init(),
        _ body: (FCMFixture) async throws -> Result
    ) async throws -> Result {
        try await FCMSimulator.withRunning(configuration) { simulator in
            let account = try simulator.makeServiceAccount(projectID: "demo-project")
            let probe = try await SimulatorProbe.connect(
                port: simulator.port,
                trustRootsPEM: simulator.caCertificatePEM
            )
            do {
                let result = try await body(FCMFixture(simulator: simulator, account: account, probe: probe))
                await probe.close()
                return result
            } catch {
                await probe.close()
                throw error
            }
        }
    }

    /// One call to the simulator's control API with curl (a client we did not write); its body.
    func control(_ method: String, _ path: String, _ body: String? = nil) throws -> String {
        let base = "http://127.0.0.1:\(try #require(simulator.controlPort))"
        var arguments = ["-sS", "-X", method, base + path]
        if let body { arguments += ["-H", "content-type: application/json", "-d", body] }
        let result = try run("curl", arguments)
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout
    }

    /// An RS256 JWT with the given header and claims, signed with the account's key; written here,
    /// independently of the gateway's signer.
    func jwt(header: [String: Any]? = nil, claims: [String: Any], key: _RSA.Signing.PrivateKey? = nil) throws -> String
    {
        let header = header ?? ["alg": "RS256", "typ": "JWT", "kid": account.privateKeyID]
        let input =
            base64URL(try JSONSerialization.data(withJSONObject: header)) + "."
            + base64URL(try JSONSerialization.data(withJSONObject: claims))
        let signingKey = try key ?? _RSA.Signing.PrivateKey(pemRepresentation: account.privateKeyPEM)
        let signature = try signingKey.signature(for: SHA256.hash(data: Array(input.utf8)), padding: .insecurePKCS1v1_5)
        return input + "." + base64URL(signature.rawRepresentation)
    }

    /// Google's claims for this account, issued now.
    func claims(iat: Date = Date(), lifetime: TimeInterval = 3600) -> [String: Any] {
        [
            "iss": account.clientEmail, "scope": "https://www.googleapis.com/auth/firebase.messaging",
            "aud": simulator.tokenURI, "iat": Int(iat.timeIntervalSince1970),
            "exp": Int(iat.timeIntervalSince1970 + lifetime),
        ]
    }

    func tokenRequest(_ assertion: String) async throws -> SimulatorProbe.Response {
        let body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
        return try await response(
            SimulatorProbe.Request(
                path: "/token",
                headers: [("content-type", "application/x-www-form-urlencoded")],
                body: Array(body.utf8)
            )
        )
    }

    /// A fresh access token from the token endpoint.
    func accessToken() async throws -> String {
        let answer = try await tokenRequest(try jwt(claims: claims()))
        guard answer.status == 200, let token = json(answer)["access_token"] as? String else {
            throw FixtureError(text: "token endpoint answered \(answer.status)")
        }
        return token
    }

    func send(
        _ message: String,
        accessToken: String?,
        project: String = "demo-project"
    ) async throws
        -> SimulatorProbe.Response
    {
        var headers = [("content-type", "application/json")]
        if let accessToken { headers.append(("authorization", "Bearer \(accessToken)")) }
        return try await response(
            SimulatorProbe.Request(
                path: "/v1/projects/\(project)/messages:send",
                headers: headers,
                body: Array(message.utf8)
            )
        )
    }

    func response(_ request: SimulatorProbe.Request) async throws -> SimulatorProbe.Response {
        guard let response = try await probe.send(request).response else { throw FixtureError(text: "no response") }
        return response
    }
}

struct FixtureError: Error { var text: String }

func json(_ response: SimulatorProbe.Response) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]) ?? [:]
}

/// `error.details[0].errorCode` of an FCM error answer.
func errorCode(_ response: SimulatorProbe.Response) -> String? {
    let error = json(response)["error"] as? [String: Any]
    return (error?["details"] as? [[String: Any]])?.first?["errorCode"] as? String
}

func base64URL(_ data: Data) -> String {
    data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// Runs a program to completion and returns its exit status and output.
func run(
    _ executable: String,
    _ arguments: [String],
    environment: [String: String] = [:]
) throws
    -> (status: Int32, stdout: String, stderr: String)
{
    let process = SpawnedProcess()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [executable] + arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let stdout = out.fileHandleForReading.readToEndRetryingInterrupts()
    let stderr = err.fileHandleForReading.readToEndRetryingInterrupts()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
}
