import APNsSimulator
import Foundation
import Testing

@Suite("Provider tokens")
struct ProviderTokenTests {
    let signer = TestTokenSigner()
    let clock = ManualSimulatorClock(start: Date(timeIntervalSince1970: 1_800_000_000))

    func configuration() -> APNsSimulator.Configuration {
        var configuration = APNsSimulator.Configuration()
        configuration.tokenKeys = [self.signer.simulatorKey]
        configuration.clock = self.clock
        return configuration
    }

    func push(_ token: String?, topic: String = "com.any.app") -> SimulatorProbe.Request {
        var headers = alertHeaders(topic: topic)
        if let token { headers.append(("authorization", "bearer \(token)")) }
        return .push(token: deviceToken(), headers: headers)
    }

    func answer(_ probe: SimulatorProbe, _ request: SimulatorProbe.Request) async throws -> String {
        let response = try #require(try await probe.send(request).response)
        return "\(response.status) \(response.reason ?? "-")"
    }

    @Test func aValidTokenMayPushToAnyTopic() async throws {
        try await withSimulatorAndProbe(self.configuration()) { _, probe in
            let token = try self.signer.token(issuedAt: self.clock.now())
            #expect(try await self.answer(probe, self.push(token, topic: "com.one")) == "200 -")
            #expect(
                try await self.answer(
                    probe,
                    self.push(token, topic: "com.two.voip").withHeader("apns-push-type", "voip")
                ) == "200 -"
            )
        }
    }

    @Test func invalidTokensAreRejectedWithApplesReasons() async throws {
        let now = self.clock.now()
        let cases: [(String?, String)] = [
            (nil, "403 MissingProviderToken"),
            ("garbage", "403 InvalidProviderToken"),
            (try self.signer.token(issuedAt: now, keyID: "UNKNOWNKID"), "403 InvalidProviderToken"),
            (try self.signer.token(issuedAt: now, teamID: "OTHERTEAM0"), "403 InvalidProviderToken"),
            (
                try TestTokenSigner(keyID: self.signer.keyID, teamID: self.signer.teamID).token(issuedAt: now),
                "403 InvalidProviderToken"
            ),
            (try self.signer.token(issuedAt: now.addingTimeInterval(-3601)), "403 ExpiredProviderToken"),
        ]
        for (token, expected) in cases {
            // A fresh connection for each, so no token was adopted before.
            try await withSimulatorAndProbe(self.configuration()) { (_, probe) async throws in
                #expect(try await self.answer(probe, self.push(token)) == expected)
            }
        }
    }

    @Test func aTokenExpiresAnHourAfterItsIssueTime() async throws {
        try await withSimulatorAndProbe(self.configuration()) { _, probe in
            let token = try self.signer.token(issuedAt: self.clock.now())
            #expect(try await self.answer(probe, self.push(token)) == "200 -")
            self.clock.advance(by: 3600)
            #expect(try await self.answer(probe, self.push(token)) == "200 -")
            self.clock.advance(by: 1)
            #expect(try await self.answer(probe, self.push(token)) == "403 ExpiredProviderToken")
        }
    }

    @Test func changingTheTokenWithinTwentyMinutesIsTooManyProviderTokenUpdates() async throws {
        try await withSimulatorAndProbe(self.configuration()) { _, probe in
            let first = try self.signer.token(issuedAt: self.clock.now())
            #expect(try await self.answer(probe, self.push(first)) == "200 -")
            self.clock.advance(by: 19 * 60)
            let second = try self.signer.token(issuedAt: self.clock.now())
            #expect(try await self.answer(probe, self.push(second)) == "429 TooManyProviderTokenUpdates")
            self.clock.advance(by: 60)
            #expect(try await self.answer(probe, self.push(second)) == "200 -")
        }
    }

    @Test func aNewConnectionMayStartWithANewToken() async throws {
        try await APNsSimulator.withRunning(self.configuration()) { simulator in
            for _ in 0..<2 {
                let probe = try await SimulatorProbe.connect(
                    port: simulator.port,
                    trustRootsPEM: simulator.caCertificatePEM
                )
                let token = try self.signer.token(issuedAt: self.clock.now())
                #expect(try await self.answer(probe, self.push(token)) == "200 -")
                await probe.close()
                self.clock.advance(by: 60)
            }
        }
    }
}

@Suite("Client certificates")
struct ClientCertificateTests {
    func configuration(
        _ authority: SimulatorCertificateAuthority,
        tokenKeys: [ProviderTokenKey] = []
    ) -> APNsSimulator.Configuration {
        var configuration = APNsSimulator.Configuration()
        configuration.tls = .authority(authority)
        configuration.clientCertificateAuthorityPEM = authority.certificatePEM
        configuration.tokenKeys = tokenKeys
        return configuration
    }

    func answer(_ probe: SimulatorProbe, topic: String?, pushType: String = "alert") async throws -> String {
        var headers = [("apns-push-type", pushType)]
        if let topic { headers.append(("apns-topic", topic)) }
        let response = try #require(try await probe.send(.push(token: deviceToken(), headers: headers)).response)
        return "\(response.status) \(response.reason ?? "-")"
    }

    @Test func theCertificatesUIDNamesTheAllowedTopicAndItsSuffixes() async throws {
        let authority = try SimulatorCertificateAuthority()
        let client = try authority.issueClientCertificate(topic: bundleID)
        try await withSimulatorAndProbe(self.configuration(authority), clientCertificate: client) {
            (simulator, probe) async throws in
            #expect(try await self.answer(probe, topic: bundleID) == "200 -")
            #expect(try await self.answer(probe, topic: bundleID + ".voip", pushType: "voip") == "200 -")
            #expect(
                try await self.answer(probe, topic: bundleID + ".push-type.liveactivity", pushType: "liveactivity")
                    == "200 -"
            )
            #expect(try await self.answer(probe, topic: "com.other.app") == "400 TopicDisallowed")
            #expect(
                try await self.answer(probe, topic: "com.other.app.voip", pushType: "voip") == "400 TopicDisallowed"
            )
            // Apple: location pushes need token authentication.
            #expect(
                try await self.answer(probe, topic: bundleID + ".location-query", pushType: "location")
                    == "400 TopicDisallowed"
            )
            // Apple: without apns-topic, the certificate's subject is the topic.
            #expect(try await self.answer(probe, topic: nil) == "200 -")
            #expect(simulator.notifications().count == 4)
        }
    }

    @Test func withOnlyAClientCAAConnectionWithoutACertificateIsRefusedAtTheTLSLevel() async throws {
        let authority = try SimulatorCertificateAuthority()
        try await APNsSimulator.withRunning(self.configuration(authority)) { simulator in
            await #expect(throws: (any Error).self) {
                let probe = try await SimulatorProbe.connect(
                    port: simulator.port,
                    trustRootsPEM: simulator.caCertificatePEM
                )
                // TLS 1.3 may report the refusal only on first use.
                _ = try await probe.send(.push(token: deviceToken(), headers: alertHeaders()), timeout: .seconds(5))
                    .response!
                await probe.close()
            }
        }
    }

    @Test func aCertificateFromAnotherCAIsRefused() async throws {
        let authority = try SimulatorCertificateAuthority()
        let stranger = try SimulatorCertificateAuthority(commonName: "someone else")
        let client = try stranger.issueClientCertificate(topic: bundleID)
        try await APNsSimulator.withRunning(self.configuration(authority)) { simulator in
            await #expect(throws: (any Error).self) {
                let probe = try await SimulatorProbe.connect(
                    port: simulator.port,
                    trustRootsPEM: simulator.caCertificatePEM,
                    clientCertificatePEM: client.certificatePEM,
                    clientPrivateKeyPEM: client.privateKeyPEM
                )
                _ = try await probe.send(.push(token: deviceToken(), headers: alertHeaders()), timeout: .seconds(5))
                    .response!
                await probe.close()
            }
        }
    }

    @Test func withTokenKeysTooCertificateAndTokenClientsBothConnect() async throws {
        let authority = try SimulatorCertificateAuthority()
        let signer = TestTokenSigner()
        let client = try authority.issueClientCertificate(topic: bundleID)
        let configuration = self.configuration(authority, tokenKeys: [signer.simulatorKey])
        try await APNsSimulator.withRunning(configuration) { simulator in
            let certificateProbe = try await SimulatorProbe.connect(
                port: simulator.port,
                trustRootsPEM: simulator.caCertificatePEM,
                clientCertificatePEM: client.certificatePEM,
                clientPrivateKeyPEM: client.privateKeyPEM
            )
            #expect(try await self.answer(certificateProbe, topic: bundleID) == "200 -")
            await certificateProbe.close()

            let tokenProbe = try await SimulatorProbe.connect(
                port: simulator.port,
                trustRootsPEM: simulator.caCertificatePEM
            )
            #expect(try await self.answer(tokenProbe, topic: "com.other") == "403 MissingProviderToken")
            let token = try signer.token(issuedAt: Date())
            let response = try await tokenProbe.send(
                .push(
                    token: deviceToken(),
                    headers: alertHeaders(topic: "com.other", extra: [("authorization", "bearer \(token)")])
                )
            ).response
            #expect(response?.status == 200)
            await tokenProbe.close()
        }
    }
}

extension SimulatorProbe.Request {
    func withHeader(_ name: String, _ value: String) -> Self {
        var copy = self
        copy.headers.removeAll { $0.0 == name }
        copy.headers.append((name, value))
        return copy
    }
}
