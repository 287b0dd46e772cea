import Foundation
import Testing

@testable import APNsSimulator

@Suite("Connection state machine")
struct SimulatorConnectionStateMachineTests {
    @Test func streamsAreProcessedWhileNoFaultIsSet() {
        var machine = SimulatorConnectionStateMachine()
        #expect(machine.streamOpened(id: 1, goAwayAfterStreams: nil) == .process)
        #expect(machine.streamOpened(id: 3, goAwayAfterStreams: nil) == .process)
        #expect(machine.streamAnswered(id: 1, dropAfterStreams: nil) == .none)
        #expect(machine.streamAnswered(id: 3, dropAfterStreams: nil) == .none)
        #expect(!machine.isClosed)
    }

    @Test func goAwayNamesTheNthStreamIgnoresLaterOnesAndClosesOnceTheRestAreAnswered() {
        var machine = SimulatorConnectionStateMachine()
        #expect(machine.streamOpened(id: 1, goAwayAfterStreams: 3) == .process)
        #expect(machine.streamOpened(id: 3, goAwayAfterStreams: 3) == .process)
        #expect(machine.streamOpened(id: 5, goAwayAfterStreams: 3) == .sendGoAwayAndProcess(lastStreamID: 5))
        #expect(machine.streamOpened(id: 7, goAwayAfterStreams: 3) == .ignore)
        #expect(machine.streamAnswered(id: 5, dropAfterStreams: nil) == .none)
        #expect(machine.streamAnswered(id: 1, dropAfterStreams: nil) == .none)
        #expect(machine.streamAnswered(id: 3, dropAfterStreams: nil) == .close)
        #expect(machine.isClosed)
    }

    @Test func aGoAwayFaultSetLateTriggersOnTheNextStream() {
        var machine = SimulatorConnectionStateMachine()
        for id in stride(from: 1, through: 9, by: 2) {
            #expect(machine.streamOpened(id: id, goAwayAfterStreams: nil) == .process)
            #expect(machine.streamAnswered(id: id, dropAfterStreams: nil) == .none)
        }
        #expect(machine.streamOpened(id: 11, goAwayAfterStreams: 2) == .sendGoAwayAndProcess(lastStreamID: 11))
        #expect(machine.streamAnswered(id: 11, dropAfterStreams: nil) == .close)
    }

    @Test func aStreamResetByTheClientCountsAsDrainedForGoAway() {
        var machine = SimulatorConnectionStateMachine()
        #expect(machine.streamOpened(id: 1, goAwayAfterStreams: 2) == .process)
        #expect(machine.streamOpened(id: 3, goAwayAfterStreams: 2) == .sendGoAwayAndProcess(lastStreamID: 3))
        #expect(machine.streamAnswered(id: 3, dropAfterStreams: nil) == .none)
        #expect(machine.streamClosedUnanswered(id: 1) == .close)
    }

    @Test func dropAfterNClosesOnceNStreamsAreAnswered() {
        var machine = SimulatorConnectionStateMachine()
        #expect(machine.streamOpened(id: 1, goAwayAfterStreams: nil) == .process)
        #expect(machine.streamOpened(id: 3, goAwayAfterStreams: nil) == .process)
        #expect(machine.streamOpened(id: 5, goAwayAfterStreams: nil) == .process)
        #expect(machine.streamAnswered(id: 1, dropAfterStreams: 2) == .none)
        #expect(machine.streamAnswered(id: 3, dropAfterStreams: 2) == .close)
        #expect(machine.streamOpened(id: 7, goAwayAfterStreams: nil) == .ignore)
        #expect(machine.streamAnswered(id: 5, dropAfterStreams: 2) == .none)
    }

    @Test func dropAfterZeroDropsOnAccept() {
        #expect(SimulatorConnectionStateMachine.dropsOnAccept(dropAfterStreams: 0))
        #expect(!SimulatorConnectionStateMachine.dropsOnAccept(dropAfterStreams: 1))
        #expect(!SimulatorConnectionStateMachine.dropsOnAccept(dropAfterStreams: nil))
    }
}

@Suite("Provider token tracker")
struct ProviderTokenTrackerTests {
    let signer = TestTokenSigner()
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    var verifier: ProviderTokenVerifier { ProviderTokenVerifier(keys: [self.signer.simulatorKey]) }

    @Test func aFreshTokenIsAuthorizedAndKeptUntilItIsAnHourOld() throws {
        var tracker = ProviderTokenTracker()
        let token = try self.signer.token(issuedAt: self.start)
        #expect(
            tracker.requestReceived(authorization: "bearer \(token)", now: self.start, verifier: self.verifier)
                == .authorized(teamID: self.signer.teamID)
        )
        #expect(
            tracker.requestReceived(authorization: "bearer \(token)", now: self.start + 3600, verifier: self.verifier)
                == .authorized(teamID: self.signer.teamID)
        )
        #expect(
            tracker.requestReceived(authorization: "bearer \(token)", now: self.start + 3601, verifier: self.verifier)
                == .rejected(.expiredProviderToken)
        )
    }

    @Test func aNewTokenWithinTwentyMinutesIsTooManyUpdatesAfterwardsItIsAdopted() throws {
        var tracker = ProviderTokenTracker()
        let first = try self.signer.token(issuedAt: self.start)
        let second = try self.signer.token(issuedAt: self.start + 600)
        let third = try self.signer.token(issuedAt: self.start + 1200)
        _ = tracker.requestReceived(authorization: "bearer \(first)", now: self.start, verifier: self.verifier)
        #expect(
            tracker.requestReceived(authorization: "bearer \(second)", now: self.start + 600, verifier: self.verifier)
                == .rejected(.tooManyProviderTokenUpdates)
        )
        // The first token still works on this connection.
        #expect(
            tracker.requestReceived(authorization: "bearer \(first)", now: self.start + 601, verifier: self.verifier)
                == .authorized(teamID: self.signer.teamID)
        )
        #expect(
            tracker.requestReceived(authorization: "bearer \(third)", now: self.start + 1200, verifier: self.verifier)
                == .authorized(teamID: self.signer.teamID)
        )
    }

    @Test func missingMalformedAndForeignTokensAreRejected() throws {
        var tracker = ProviderTokenTracker()
        let now = self.start
        #expect(
            tracker.requestReceived(authorization: nil, now: now, verifier: self.verifier)
                == .rejected(.missingProviderToken)
        )
        #expect(
            tracker.requestReceived(authorization: "bearer", now: now, verifier: self.verifier)
                == .rejected(.invalidProviderToken)
        )
        #expect(
            tracker.requestReceived(authorization: "bearer a.b.c", now: now, verifier: self.verifier)
                == .rejected(.invalidProviderToken)
        )
        let unknownKey = try self.signer.token(issuedAt: now, keyID: "ZZZZZZZZZZ")
        #expect(
            tracker.requestReceived(authorization: "bearer \(unknownKey)", now: now, verifier: self.verifier)
                == .rejected(.invalidProviderToken)
        )
        let wrongTeam = try self.signer.token(issuedAt: now, teamID: "OTHERTEAM1")
        #expect(
            tracker.requestReceived(authorization: "bearer \(wrongTeam)", now: now, verifier: self.verifier)
                == .rejected(.invalidProviderToken)
        )
        let otherSigner = TestTokenSigner(keyID: self.signer.keyID, teamID: self.signer.teamID)
        let badSignature = try otherSigner.token(issuedAt: now)
        #expect(
            tracker.requestReceived(authorization: "bearer \(badSignature)", now: now, verifier: self.verifier)
                == .rejected(.invalidProviderToken)
        )
        let hs256 = try self.signer.token(issuedAt: now, algorithm: "HS256")
        #expect(
            tracker.requestReceived(authorization: "bearer \(hs256)", now: now, verifier: self.verifier)
                == .rejected(.invalidProviderToken)
        )
    }

    @Test func verifierReportsWhyATokenFails() throws {
        let now = self.start
        #expect(self.verifier.verify(try self.signer.token(issuedAt: now, keyID: "NOPE")[...]) == .failure(.unknownKey))
        #expect(self.verifier.verify(try self.signer.token(issuedAt: now, teamID: "NOPE")[...]) == .failure(.wrongTeam))
        #expect(self.verifier.verify("not-a-jwt") == .failure(.malformed))
        let good = try self.signer.token(issuedAt: now)
        let claims = try self.verifier.verify(good[...]).get()
        #expect(
            claims
                == .init(
                    keyID: self.signer.keyID,
                    teamID: self.signer.teamID,
                    issuedAt: Int64(now.timeIntervalSince1970)
                )
        )
    }
}

@Suite("Request validator rules")
struct ValidatorRuleTests {
    @Test(arguments: [
        ("GET", "/3/device/abcd", SimulatedReason.methodNotAllowed),
        ("POST", "/3/devices/abcd", .badPath),
        ("POST", "/2/device/abcd", .badPath),
        ("POST", "/3/device/ab/cd", .badPath),
        ("POST", "/3/device/", .missingDeviceToken),
        ("POST", "/3/device/abc", .badDeviceToken),
        ("POST", "/3/device/zz", .badDeviceToken),
    ])
    func routeRejections(method: String, path: String, reason: SimulatedReason) {
        #expect(APNsRequestValidator.route(method: method, path: path) == .failure(.init(reason)))
    }

    @Test func routeAcceptsHexTokensOfAnyEvenLength() {
        #expect(APNsRequestValidator.route(method: "POST", path: "/3/device/ABcd") == .success("ABcd"))
        #expect(
            APNsRequestValidator.route(method: "POST", path: "/3/device/\(deviceToken())") == .success(deviceToken())
        )
    }

    @Test func canonicalUUIDs() {
        #expect(APNsRequestValidator.isCanonicalUUID("123e4567-e89b-12d3-a456-426655440000"))
        #expect(APNsRequestValidator.isCanonicalUUID("123E4567-E89B-12D3-A456-426655440000"))
        #expect(!APNsRequestValidator.isCanonicalUUID("123e4567e89b12d3a456426655440000"))
        #expect(!APNsRequestValidator.isCanonicalUUID("123e4567-e89b-12d3-a456-42665544000g"))
        #expect(!APNsRequestValidator.isCanonicalUUID("{123e4567-e89b-12d3-a456-426655440000}"))
    }

    @Test func topicSuffixes() {
        #expect(APNsRequestValidator.bundleID(of: "com.a", for: .alert) == "com.a")
        #expect(APNsRequestValidator.bundleID(of: "com.a.voip", for: .alert) == nil)
        #expect(APNsRequestValidator.bundleID(of: "com.a.voip", for: .voip) == "com.a")
        #expect(APNsRequestValidator.bundleID(of: "com.a.voip-ptt", for: .pushtotalk) == "com.a")
        #expect(APNsRequestValidator.bundleID(of: "com.a.voip-ptt", for: .voip) == nil)
        #expect(APNsRequestValidator.bundleID(of: "com.a.push-type.liveactivity", for: .liveactivity) == "com.a")
        #expect(APNsRequestValidator.bundleID(of: "com.a", for: .widgets) == nil)
        #expect(APNsRequestValidator.bundleID(of: ".voip", for: .voip) == nil)
    }

    @Test func rejectionBodiesAreApplesJSON() {
        #expect(SimulatedRejection(.badTopic).body == #"{"reason":"BadTopic"}"#)
        #expect(
            SimulatedRejection(.unregistered, timestampMilliseconds: 1_700_000_000_123).body
                == #"{"reason":"Unregistered","timestamp":1700000000123}"#
        )
        #expect(SimulatedRejection(status: 400, reason: "Odd\"One").body == #"{"reason":"Odd\"One"}"#)
    }

    @Test func everyReasonHasApplesStatus() {
        #expect(SimulatedReason.badCollapseId.status == 400)
        #expect(SimulatedReason.invalidProviderToken.status == 403)
        #expect(SimulatedReason.badPath.status == 404)
        #expect(SimulatedReason.methodNotAllowed.status == 405)
        #expect(SimulatedReason.unregistered.status == 410)
        #expect(SimulatedReason.payloadTooLarge.status == 413)
        #expect(SimulatedReason.tooManyProviderTokenUpdates.status == 429)
        #expect(SimulatedReason.internalServerError.status == 500)
        #expect(SimulatedReason.serviceUnavailable.status == 503)
    }
}

@Suite("Fault updates")
struct FaultsUpdateTests {
    @Test func presentKeysChangeNullResetsAbsentKeeps() throws {
        var faults = SimulatorFaults(latencyMilliseconds: 5, goAwayAfterStreams: 3, blackhole: true)
        let update = try FaultsUpdate.decode(
            Data(#"{"latency_ms": 10, "goaway_after_streams": null, "rate_429": 0.5}"#.utf8)
        )
        update.apply(to: &faults)
        #expect(faults == SimulatorFaults(latencyMilliseconds: 10, rate429: 0.5, blackhole: true))
    }

    @Test func unknownKeysAndWrongTypesAreErrorsNamingTheKey() {
        do {
            _ = try FaultsUpdate.decode(Data(#"{"latency": 10}"#.utf8))
            Issue.record("expected an error")
        } catch {
            #expect("\(error)".contains("invalid fault latency: unknown key"))
        }
        do {
            _ = try FaultsUpdate.decode(Data(#"{"latency_ms": "ten"}"#.utf8))
            Issue.record("expected an error")
        } catch {
            #expect("\(error)".contains("latency_ms"))
        }
    }

    @Test func rangesAreChecked() {
        #expect(throws: SimulatorError.self) { try SimulatorFaults(rate429: 1.5).validated() }
        #expect(throws: SimulatorError.self) { try SimulatorFaults(rate429: 0.6, rate500: 0.6).validated() }
        #expect(throws: SimulatorError.self) { try SimulatorFaults(goAwayAfterStreams: 0).validated() }
        #expect(throws: SimulatorError.self) { try SimulatorFaults(latencyMilliseconds: -1).validated() }
    }
}

@Suite("Certificates")
struct CertificateTests {
    @Test func aClientCertificateNamesItsTopicInTheSubjectUID() throws {
        let authority = try SimulatorCertificateAuthority()
        let client = try authority.issueClientCertificate(topic: "com.example.uid")
        #expect(SimulatorConnectionHandler.bundleID(ofDER: try der(client.certificatePEM)) == "com.example.uid")
        let server = try authority.issueServerCertificate()
        #expect(SimulatorConnectionHandler.bundleID(ofDER: try der(server.certificatePEM)) == nil)
    }

    @Test func anAuthorityRoundTripsThroughPEM() throws {
        let authority = try SimulatorCertificateAuthority()
        let reloaded = try SimulatorCertificateAuthority(
            certificatePEM: authority.certificatePEM,
            privateKeyPEM: authority.privateKeyPEM
        )
        #expect(reloaded.certificatePEM == authority.certificatePEM)
        _ = try reloaded.issueClientCertificate(topic: "com.example.again")
    }
}

/// The DER bytes of a single-certificate PEM document.
func der(_ pem: String) throws -> [UInt8] {
    let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    return Array(try #require(Data(base64Encoded: body)))
}
