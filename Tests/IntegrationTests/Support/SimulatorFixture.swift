import APNsHTTP2
import APNsSimulator
import APNsTransport
import Crypto
import Foundation
import NIOCore
import PushTransport
import PushgateCore

/// The two ways a client authenticates, each wired to a simulator that checks it.
enum TestAuthentication: String, CaseIterable, CustomStringConvertible, Sendable {
    case certificate
    case token
    var description: String { rawValue }
}

/// Joins our client to our simulator in-process, on loopback, port 0.
struct SimulatorFixture {
    static let topic = "com.example.pushgate"
    static let keyID = "KEY1234567"
    static let teamID = "TEAM123456"

    /// Runs `body` with a simulator that checks `authentication` and a client configured for it.
    static func with<Result: Sendable>(
        _ authentication: TestAuthentication,
        simulator tweakSimulator: (inout APNsSimulator.Configuration) -> Void = { _ in },
        client tweakClient: (inout APNsClient.Configuration) -> Void = { _ in },
        clientClock: any WallClock = SystemWallClock(),
        _ body: (RunningAPNsSimulator, APNsClient, ProviderTokenManager?) async throws -> Result
    ) async throws -> Result {
        let directory = try TemporaryDirectory()
        let authority = try SimulatorCertificateAuthority()
        var simulatorConfiguration = APNsSimulator.Configuration()
        simulatorConfiguration.tls = .authority(authority)
        simulatorConfiguration.logger = TestLogger.make("simulator")
        let clientAuthentication: APNsClient.Authentication
        var tokenManager: ProviderTokenManager? = nil
        switch authentication {
        case .certificate:
            simulatorConfiguration.clientCertificateAuthorityPEM = authority.certificatePEM
            let issued = try authority.issueClientCertificate(topic: topic)
            try issued.write(certificateTo: directory.path("client.pem"), privateKeyTo: directory.path("client.key"))
            clientAuthentication = .certificate(
                try .load(certificatePath: directory.path("client.pem"), keyPath: directory.path("client.key"))
            )
        case .token:
            let key = P256.Signing.PrivateKey()
            simulatorConfiguration.tokenKeys = [
                ProviderTokenKey(keyID: keyID, teamID: teamID, publicKey: key.publicKey)
            ]
            let signer = try ProviderTokenSigner(privateKey: key, keyID: keyID, teamID: teamID)
            let manager = ProviderTokenManager(signer: signer, clock: clientClock)
            tokenManager = manager
            clientAuthentication = .token(manager)
        }
        tweakSimulator(&simulatorConfiguration)
        return try await APNsSimulator.withRunning(simulatorConfiguration) { running in
            var configuration = APNsClient.Configuration(
                endpoint: .init(host: "127.0.0.1", port: running.port),
                authentication: clientAuthentication,
                trustRoots: .caFile(running.caCertificatePath!)
            )
            // Generous: an answer read after it is final (`answer_timeout`, never resent), and a test process
            // starved by the full parallel run can read answers late (issue #27). Tests of the deadline set
            // their own.
            configuration.requestTimeout = .seconds(120)
            configuration.eventLoopThreads = 1
            configuration.shutdownGracePeriod = .seconds(2)
            tweakClient(&configuration)
            return try await APNsClient.withClient(configuration: configuration, logger: TestLogger.make("client")) {
                client in
                try await body(running, client, tokenManager)
            }
        }
    }

    static func content(
        pushType: PushType = .alert,
        priority: Priority = .immediate,
        payload: String = #"{"aps":{"alert":"hello"}}"#,
        collapseID: String? = nil,
        expiration: Expiration = .immediately
    ) throws -> PreparedNotification {
        PreparedNotification(
            try NotificationContent(
                topic: Topic(topic),
                pushType: pushType,
                priority: priority,
                expiration: expiration,
                collapseID: collapseID.map { try CollapseID($0) },
                payload: Payload(jsonString: payload)
            )
        )
    }

    static func token(_ index: Int) -> DeviceToken {
        try! DeviceToken(hex: String(format: "%064x", index + 1))
    }

    /// Sends one notification to each of `count` devices concurrently and returns the outcomes by device index.
    static func sendToMany(
        _ client: APNsClient,
        _ notification: PreparedNotification,
        count: Int,
        offset: Int = 0
    ) async -> [Int: APNsOutcome] {
        await withTaskGroup(of: (Int, APNsOutcome).self) { group in
            for index in offset..<(offset + count) {
                group.addTask { (index, await client.send(notification, to: token(index))) }
            }
            var outcomes: [Int: APNsOutcome] = [:]
            for await (index, outcome) in group { outcomes[index] = outcome }
            return outcomes
        }
    }
}
