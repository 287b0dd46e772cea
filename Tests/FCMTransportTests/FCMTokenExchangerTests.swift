import AsyncHTTPClient
import FCMSimulator
import FCMTransport
import Foundation
import NIOSSL
import PushgateCore
import Testing

/// An HTTP client trusting only the simulator's CA, shut down after `body`.
func withClient<Result: Sendable>(
    trusting simulator: RunningFCMSimulator,
    _ body: (HTTPClient) async throws -> Result
) async throws -> Result {
    var tls = TLSConfiguration.makeClientConfiguration()
    tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(simulator.caCertificatePEM.utf8)))
    let client = HTTPClient(
        eventLoopGroupProvider: .singleton,
        configuration: HTTPClient.Configuration(tlsConfiguration: tls)
    )
    do {
        let result = try await body(client)
        try await client.shutdown()
        return result
    } catch {
        try? await client.shutdown()
        throw error
    }
}

@Suite("FCM token exchange over AsyncHTTPClient, against the simulator")
struct FCMTokenExchangerTests {
    @Test("the manager gets one access token over real TLS, however many requests need it at once")
    func exchange() async throws {
        try await FCMSimulator.withRunning { simulator in
            let material = try simulator.makeServiceAccount(projectID: "demo-project")
            let account = try FCMServiceAccount(jsonBytes: material.jsonBytes)
            try await withClient(trusting: simulator) { client in
                let manager = FCMAccessTokenManager(
                    signer: FCMAssertionSigner(account: account),
                    exchanger: FCMTokenExchanger(client: client)
                )
                let tokens = try await withThrowingTaskGroup(of: FCMAccessToken.self) { group in
                    for _ in 0..<10 { group.addTask { try await manager.currentToken() } }
                    return try await group.reduce(into: Set<FCMAccessToken>()) { $0.insert($1) }
                }
                #expect(tokens.count == 1)
                #expect(tokens.first?.value.hasPrefix("ya29.") == true)
                #expect(simulator.stats().tokenRequests == 1)
                #expect(simulator.stats().accessTokensIssued == 1)
            }
        }
    }

    @Test(
        "an assertion the endpoint refuses (400 invalid_grant) is a definitive refusal naming the status and OAuth code only"
    )
    func refused() async throws {
        try await FCMSimulator.withRunning { simulator in
            // A service account the simulator was never told about: its assertions are refused.
            let stranger = try FCMThrowawayServiceAccount(projectID: "demo-project", tokenURI: simulator.tokenURI)
            let account = try FCMServiceAccount(jsonBytes: stranger.jsonBytes)
            try await withClient(trusting: simulator) { client in
                let assertion = try FCMAssertionSigner(account: account).assertion(issuedAt: Date())
                do throws(FCMCredentialError) {
                    _ = try await FCMTokenExchanger(client: client).exchange(
                        assertion: assertion,
                        tokenURI: account.tokenURI
                    )
                    Issue.record("a refused assertion produced a token")
                } catch {
                    #expect(error == .exchangeRefused)
                    #expect(error.isDefinitive)
                    #expect(String(reflecting: error).contains("status 400 invalid_grant"))
                    #expect(!String(reflecting: error).contains(assertion))
                }
                #expect(simulator.stats().accessTokensIssued == 0)
            }
        }
    }
}
