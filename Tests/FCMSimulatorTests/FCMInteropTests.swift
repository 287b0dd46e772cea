import FCMSimulator
import Foundation
import PushgateCore
import Testing
import _CryptoExtras

/// Whether `python3` can import every module named.
func pythonHas(_ modules: [String]) -> Bool {
    (try? run("python3", ["-c", modules.map { "import \($0)" }.joined(separator: "; ")]).status) == 0
}

let pythonModulesMissing = Comment(
    rawValue:
        "skipped: needs python3 with google-auth, PyJWT, cryptography and requests"
        + " (pip install google-auth PyJWT cryptography requests)"
)

@Suite("FCM: gateway core against the simulator")
struct FCMCoreAgainstSimulatorTests {
    @Test("our assertion gets an access token; the simulator's answers classify as the issue's table says")
    func joined() async throws {
        try await FCMFixture.with { fixture in
            let account = try FCMServiceAccount(jsonBytes: fixture.account.jsonBytes)
            let assertion = try FCMAssertionSigner(account: account).assertion(issuedAt: Date())
            let answer = try await fixture.tokenRequest(assertion)
            #expect(answer.status == 200)
            let grant = try FCMTokenGrant(jsonBytes: answer.body)
            let message = try FCMMessage(
                payload: try Payload(jsonString: #"{"aps":{"alert":"hi"},"n":1}"#),
                pushType: .alert,
                priority: .immediate,
                expiration: .at(epochSeconds: Int64(Date().timeIntervalSince1970) + 600),
                collapseID: nil,
                createdAt: Date()
            )
            func send() async throws -> FCMOutcome {
                let body = String(decoding: message.requestBody(token: "device-7"), as: UTF8.self)
                let answer = try await fixture.send(body, accessToken: grant.accessToken)
                return FCMOutcome.answered(
                    status: answer.status,
                    body: answer.body,
                    retryAfter: answer.headers["retry-after"],
                    now: Date()
                )
            }
            #expect(try await send().isAccepted)
            fixture.simulator.inject(FCMInjectedError(errorCode: "QUOTA_EXCEEDED", retryAfterSeconds: 2))
            let throttled = try await send()
            #expect(throttled.outcomeClass == .retryable)
            #expect(throttled.retryAfter == .seconds(2))
            fixture.simulator.inject(FCMInjectedError(errorCode: "THIRD_PARTY_AUTH_ERROR"))
            let alarm = try await send()
            #expect(alarm.isConfigurationAlarm && !alarm.invalidatesDevice && !alarm.accessTokenRejected)
            fixture.simulator.markUnregistered("device-7")
            #expect(try await send().invalidatesDevice)
            fixture.simulator.expireAccessTokens()
            #expect(try await send().accessTokenRejected)
        }
    }
}

@Suite("FCM: checked by code we did not write (Python google-auth, PyJWT)")
struct FCMPythonInteropTests {
    @Test(
        "google-auth's service_account.Credentials gets an access token from our token endpoint",
        .enabled(
            if: pythonHas(["google.oauth2.service_account", "google.auth.transport.requests"]),
            pythonModulesMissing
        )
    )
    func googleAuth() async throws {
        try await FCMFixture.with { fixture in
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("fcm-sa-\(UUID().uuidString).json")
                .path
            try fixture.account.write(to: path)
            defer { try? FileManager.default.removeItem(atPath: path) }
            let script = """
                import sys
                from google.oauth2 import service_account
                import google.auth.transport.requests
                credentials = service_account.Credentials.from_service_account_file(
                    sys.argv[1], scopes=["https://www.googleapis.com/auth/firebase.messaging"])
                credentials.refresh(google.auth.transport.requests.Request())
                assert credentials.valid and credentials.expiry is not None
                print(credentials.token)
                """
            let result = try run(
                "python3",
                ["-c", script, path],
                environment: ["REQUESTS_CA_BUNDLE": fixture.simulator.caCertificatePath]
            )
            #expect(result.status == 0, "\(result.stderr)")
            let token = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(token.hasPrefix("ya29."))
            // The token google-auth obtained is one the send endpoint honours.
            let answer = try await fixture.send(#"{"message":{"token":"d","data":{"k":"v"}}}"#, accessToken: token)
            #expect(answer.status == 200)
        }
    }

    @Test(
        "PyJWT verifies an assertion made by our signer (RS256, kid, iss, scope, aud, exp = iat + 3600)",
        .enabled(if: pythonHas(["jwt", "cryptography"]), pythonModulesMissing)
    )
    func pyJWT() throws {
        let material = try FCMThrowawayServiceAccount(projectID: "demo-project", tokenURI: "https://127.0.0.1:1/token")
        let account = try FCMServiceAccount(jsonBytes: material.jsonBytes)
        let assertion = try FCMAssertionSigner(account: account).assertion(issuedAt: Date())
        let keyPath = FileManager.default.temporaryDirectory.appendingPathComponent("fcm-pub-\(UUID().uuidString).pem")
            .path
        try account.publicKey.pemRepresentation.write(toFile: keyPath, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: keyPath) }
        let script = """
            import sys, jwt
            token, key_path, kid, iss, aud = sys.argv[1:6]
            key = open(key_path).read()
            assert jwt.get_unverified_header(token) == {"alg": "RS256", "typ": "JWT", "kid": kid}
            claims = jwt.decode(token, key, algorithms=["RS256"], audience=aud, issuer=iss,
                                options={"require": ["iss", "aud", "iat", "exp", "scope"]})
            assert claims["scope"] == "https://www.googleapis.com/auth/firebase.messaging", claims
            assert claims["exp"] - claims["iat"] == 3600, claims
            signing_input, signature = token.rsplit(".", 1)
            mid = len(signature) // 2
            tampered = signature[:mid] + ("A" if signature[mid] != "A" else "B") + signature[mid + 1:]
            try:
                jwt.decode(signing_input + "." + tampered, key, algorithms=["RS256"], audience=aud)
                sys.exit("a tampered signature verified")
            except jwt.InvalidSignatureError:
                pass
            print("verified")
            """
        let result = try run(
            "python3",
            ["-c", script, assertion, keyPath, account.privateKeyID, account.clientEmail, material.tokenURI]
        )
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("verified"))
    }
}
