import APNsSimulator
import FCMSimulator
import Foundation
import Testing
import _CryptoExtras

@Suite("FCM simulator: token endpoint")
struct FCMSimulatorTokenTests {
    @Test("a correctly signed assertion gets a bearer access token with an expiry")
    func grants() async throws {
        try await FCMFixture.with { fixture in
            let answer = try await fixture.tokenRequest(try fixture.jwt(claims: fixture.claims()))
            #expect(answer.status == 200)
            let body = json(answer)
            #expect((body["access_token"] as? String)?.isEmpty == false)
            #expect((body["expires_in"] as? NSNumber)?.intValue == 3599)
            #expect(body["token_type"] as? String == "Bearer")
            #expect(fixture.simulator.stats().accessTokensIssued == 1)
        }
    }

    @Test("a wrong key, a wrong kid, aud, scope or issuer, and an over-long or stale window are refused")
    func refusals() async throws {
        try await FCMFixture.with { fixture in
            let otherKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            var cases: [(String, String)] = []
            cases.append(("wrong key", try fixture.jwt(claims: fixture.claims(), key: otherKey)))
            cases.append(
                ("wrong kid", try fixture.jwt(header: ["alg": "RS256", "kid": "nope"], claims: fixture.claims()))
            )
            cases.append(("HS256", try fixture.jwt(header: ["alg": "HS256"], claims: fixture.claims())))
            for (name, value) in [("aud", "https://elsewhere/token"), ("scope", "email"), ("iss", "x@y.z")] {
                var claims = fixture.claims()
                claims[name] = value
                cases.append((name, try fixture.jwt(claims: claims)))
            }
            cases.append(("two hours", try fixture.jwt(claims: fixture.claims(lifetime: 7200))))
            cases.append(("expired", try fixture.jwt(claims: fixture.claims(iat: Date().addingTimeInterval(-7200)))))
            cases.append(("future", try fixture.jwt(claims: fixture.claims(iat: Date().addingTimeInterval(3000)))))
            for (name, assertion) in cases {
                let answer = try await fixture.tokenRequest(assertion)
                #expect(answer.status == 400, "\(name)")
                #expect(json(answer)["error"] as? String == "invalid_grant", "\(name)")
            }
            #expect(fixture.simulator.stats().accessTokensIssued == 0)
        }
    }
}

@Suite("FCM simulator: messages:send")
struct FCMSimulatorSendTests {
    let message =
        #"{"message":{"token":"device-1","notification":{"body":"hi"},"data":{"k":"v"},"#
        + #""android":{"priority":"HIGH","ttl":"60s"}}}"#

    @Test("a valid message with a valid token is accepted, named and recorded")
    func accepts() async throws {
        try await FCMFixture.with { fixture in
            let answer = try await fixture.send(message, accessToken: try await fixture.accessToken())
            #expect(answer.status == 200)
            let name = try #require(json(answer)["name"] as? String)
            #expect(name.hasPrefix("projects/demo-project/messages/"))
            let recorded = fixture.simulator.messages(token: "device-1")
            #expect(recorded.map(\.name) == [name])
            #expect(recorded.first?.messageJSON.contains(#""data":{"k":"v"}"#) == true)
        }
    }

    @Test("no token, an unknown token, an expired token: 401 UNAUTHENTICATED; another project: 403")
    func authentication() async throws {
        try await FCMFixture.with { fixture in
            for token in [nil, "ya29.made-up"] {
                let answer = try await fixture.send(message, accessToken: token)
                #expect(answer.status == 401)
                #expect((json(answer)["error"] as? [String: Any])?["status"] as? String == "UNAUTHENTICATED")
                #expect(errorCode(answer) == nil)
            }
            let token = try await fixture.accessToken()
            #expect(try await fixture.send(message, accessToken: token, project: "other").status == 403)
            fixture.simulator.expireAccessTokens()
            #expect(try await fixture.send(message, accessToken: token).status == 401)
            #expect(try await fixture.send(message, accessToken: try await fixture.accessToken()).status == 200)
        }
    }

    @Test("messages breaking Google's rules get 400 INVALID_ARGUMENT")
    func validation() async throws {
        try await FCMFixture.with { fixture in
            let token = try await fixture.accessToken()
            let big = String(repeating: "x", count: 4100)
            let invalid = [
                #"{"message":{"notification":{"body":"no target"}}}"#,
                #"{"message":{"token":"a","topic":"b"}}"#,
                #"{"message":{"token":"a","data":{"n":1}}}"#,
                #"{"message":{"token":"a","android":{"ttl":"2419201s"}}}"#,
                #"{"message":{"token":"a","android":{"ttl":"one day"}}}"#,
                #"{"message":{"token":"a","android":{"priority":"URGENT"}}}"#,
                #"{"message":{"token":"a","data":{"big":"\#(big)"}}}"#,
                #"{"message":{"token":"a","extra":1}}"#,
                #"{"msg":{}}"#,
            ]
            for body in invalid {
                let answer = try await fixture.send(body, accessToken: token)
                #expect(answer.status == 400, "\(body.prefix(80))")
                #expect(errorCode(answer) == "INVALID_ARGUMENT", "\(body.prefix(80))")
            }
            #expect(fixture.simulator.messages().isEmpty)
        }
    }

    @Test("a token marked unregistered gets 404 UNREGISTERED")
    func unregistered() async throws {
        try await FCMFixture.with { fixture in
            fixture.simulator.markUnregistered("device-1")
            let answer = try await fixture.send(message, accessToken: try await fixture.accessToken())
            #expect(answer.status == 404)
            #expect(errorCode(answer) == "UNREGISTERED")
        }
    }

    @Test("injected errors are answered with Google's status and Retry-After, then sends succeed again")
    func injected() async throws {
        try await FCMFixture.with { fixture in
            let token = try await fixture.accessToken()
            let expected = [
                ("QUOTA_EXCEEDED", 429), ("UNAVAILABLE", 503), ("INTERNAL", 500), ("SENDER_ID_MISMATCH", 403),
                ("THIRD_PARTY_AUTH_ERROR", 401), ("INVALID_ARGUMENT", 400), ("UNREGISTERED", 404),
            ]
            for (code, status) in expected {
                fixture.simulator.inject(FCMInjectedError(errorCode: code, count: 1, retryAfterSeconds: 2))
                let answer = try await fixture.send(message, accessToken: token)
                #expect(answer.status == status, "\(code)")
                #expect(errorCode(answer) == code)
                #expect(answer.headers["retry-after"] == "2")
            }
            #expect(try await fixture.send(message, accessToken: token).status == 200)
        }
    }

    @Test("HTTP/1.1 reaches the token endpoint too (OAuth libraries speak it)")
    func http1() async throws {
        try await FCMFixture.with { fixture in
            let assertion = try fixture.jwt(claims: fixture.claims())
            let result = try run(
                "curl",
                [
                    "-sS", "--http1.1", "--cacert", fixture.simulator.caCertificatePath, "-d",
                    "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)",
                    fixture.simulator.tokenURI,
                ]
            )
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains("access_token"))
        }
    }
}

@Suite("FCM simulator: control API")
struct FCMSimulatorControlTests {
    @Test(
        "token-endpoint faults over HTTP: a 503 outage, an invalid_grant refusal, armed after N accepted with revocation; bad input changes nothing"
    )
    func tokenFaults() async throws {
        try await FCMFixture.with { fixture in
            let message = #"{"message":{"token":"device-1","data":{"k":"v"}}}"#
            func tokenStatus() async throws -> Int {
                try await fixture.tokenRequest(try fixture.jwt(claims: fixture.claims())).status
            }
            let token = try await fixture.accessToken()
            _ = try fixture.control("POST", "/token-faults", #"{"status": 503}"#)
            #expect(try await tokenStatus() == 503)
            #expect(try fixture.control("GET", "/token-faults").contains(#""in_force":true"#))
            #expect(try await fixture.send(message, accessToken: token).status == 200, "issued tokens still work")

            _ = try fixture.control("POST", "/token-faults", #"{"error": "invalid_grant"}"#)
            let refused = try await fixture.tokenRequest(try fixture.jwt(claims: fixture.claims()))
            #expect(refused.status == 400)
            #expect(json(refused)["error"] as? String == "invalid_grant")

            _ = try fixture.control("DELETE", "/token-faults")
            #expect(try await tokenStatus() == 200)

            // Armed: in force from the next accepted message, which also revokes the tokens issued so far.
            let armed = #"{"status": 503, "revoke_access_tokens": true, "after_accepted": 1}"#
            _ = try fixture.control("POST", "/token-faults", armed)
            #expect(try fixture.control("GET", "/token-faults").contains(#""in_force":false"#))
            #expect(try await tokenStatus() == 200)
            #expect(try await fixture.send(message, accessToken: token).status == 200)
            #expect(try await fixture.send(message, accessToken: token).status == 401, "revoked")
            #expect(try await tokenStatus() == 503)
            #expect(fixture.simulator.stats().tokenFaultAnswers == 3)

            // Bad input is refused with the reason, and the faults in force stay as they were.
            #expect(
                try fixture.control("POST", "/token-faults", #"{"status": "503"}"#).contains("must be integers")
            )
            #expect(
                try fixture.control("POST", "/token-faults", #"{"statuss": 503}"#).contains("unknown key statuss")
            )
            #expect(try fixture.control("POST", "/token-faults", #"{"status": 200}"#).contains("400...599"))
            #expect(try fixture.control("POST", "/token-faults", #"{"seconds": 0}"#).contains("seconds must be"))
            #expect(try await tokenStatus() == 503)

            _ = try fixture.control("POST", "/reset")
            let fresh = try await fixture.accessToken()
            #expect(try await fixture.send(message, accessToken: fresh).status == 200)
            _ = try fixture.control("POST", "/access-tokens/revoke")
            #expect(try await fixture.send(message, accessToken: fresh).status == 401)
            #expect(try await fixture.send(message, accessToken: try await fixture.accessToken()).status == 200)
        }
    }

    @Test("errors, unregistered tokens and expiry are set over HTTP; messages are listed; reset forgets")
    func control() async throws {
        try await FCMFixture.with { fixture in
            let message = #"{"message":{"token":"device-9","data":{"k":"v"}}}"#
            var token = try await fixture.accessToken()
            _ = try fixture.control("POST", "/errors", #"{"errorCode":"QUOTA_EXCEEDED","count":1,"retryAfter":2}"#)
            let throttled = try await fixture.send(message, accessToken: token)
            #expect(throttled.status == 429)
            #expect(throttled.headers["retry-after"] == "2")
            #expect(try await fixture.send(message, accessToken: token).status == 200)
            #expect(try fixture.control("GET", "/messages?token=device-9").contains(#""token":"device-9""#))
            _ = try fixture.control("POST", "/unregister", #"{"token":"device-9"}"#)
            #expect(try await fixture.send(message, accessToken: token).status == 404)
            _ = try fixture.control("POST", "/access-tokens/expire")
            #expect(try await fixture.send(message, accessToken: token).status == 401)
            _ = try fixture.control("POST", "/reset")
            #expect(try fixture.control("GET", "/messages") == #"{"messages":[]}"#)
            token = try await fixture.accessToken()
            #expect(try await fixture.send(message, accessToken: token).status == 200)
            #expect(
                try fixture.control("POST", "/errors", #"{"errorCode":"NOPE"}"#).contains("errorCode must be one of")
            )
        }
    }
}
