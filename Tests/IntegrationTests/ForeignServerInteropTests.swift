import APNsHTTP2
import APNsTransport
import Foundation
import PushTransport
import PushgateCore
import Testing

/// The client against HTTP/2 servers nobody here wrote: if we misread HTTP/2, TLS or ALPN in both
/// our client and our simulator, these still catch it.
@Suite("Interoperability with foreign HTTP/2 servers", .serialized)
struct ForeignServerInteropTests {
    static let token = String(repeating: "ab", count: 32)

    @Test(
        "the client delivers to nghttpd over TLS with ALPN h2",
        .enabled(
            if: ExternalTools.isInstalled("nghttpd") && ExternalTools.isInstalled("openssl"),
            "needs nghttp2-server and openssl (.ci/run installs them)"
        ),
        .timeLimit(.minutes(2))
    )
    func clientTalksToNghttpd() async throws {
        let directory = try TemporaryDirectory()
        let certificate = try OpenSSLServerCertificate.make(in: directory)
        // nghttpd answers POST with the static file at the path: put one where each device's path points.
        let docs = directory.url.appendingPathComponent("docs/3/device")
        try FileManager.default.createDirectory(at: docs, withIntermediateDirectories: true)
        let tokens = (0..<200).map { String(format: "%064x", $0 + 1) }
        for token in tokens {
            _ = FileManager.default.createFile(atPath: docs.appendingPathComponent(token).path, contents: Data())
        }

        let port = ExternalTools.freeTCPPort()
        let server = try ChildProcess(
            "nghttpd",
            ["-d", directory.path("docs"), "\(port)", certificate.keyPath, certificate.certificatePath]
        )
        defer { server.terminate() }
        try await ExternalTools.waitForListener(port: port)

        // Token auth with a throwaway key: nghttpd ignores `authorization`, but the header path runs.
        let signer = try ProviderTokenSigner(privateKey: .init(), keyID: "KEY1234567", teamID: "TEAM123456")
        var configuration = APNsClient.Configuration(
            endpoint: .init(host: "localhost", port: port),
            authentication: .token(ProviderTokenManager(signer: signer)),
            trustRoots: .caFile(certificate.caPath)
        )
        configuration.maximumConnections = 2
        let content = try NotificationContent(
            topic: Topic("com.example.app"),
            pushType: .alert,
            priority: .immediate,
            payload: .alert("interop")
        )
        let prepared = PreparedNotification(content)

        let outcomes = try await APNsClient.withClient(configuration: configuration, logger: TestLogger.make("interop"))
        { client in
            try await withThrowingTaskGroup(of: APNsOutcome.self) { group in
                for token in tokens {
                    let device = try DeviceToken(hex: token)
                    group.addTask { await client.send(prepared, to: device) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
        }
        #expect(outcomes.count == tokens.count)
        #expect(
            outcomes.allSatisfy { $0.status == 200 && $0.outcomeClass == .accepted },
            "\(outcomes.first { !$0.isAccepted }.map { "\($0)" } ?? "")"
        )

        // A path nghttpd has no file for is a 404: a rejection, not a retry.
        let missing = try await APNsClient.withClient(
            configuration: configuration,
            logger: TestLogger.make("interop-404")
        ) { client in
            await client.send(prepared, to: try DeviceToken(hex: String(repeating: "cd", count: 32)))
        }
        #expect(missing.status == 404)
        #expect(missing.outcomeClass == .rejected)
    }

    @Test(
        "the client refuses a server whose certificate no trusted CA signed",
        .enabled(
            if: ExternalTools.isInstalled("nghttpd") && ExternalTools.isInstalled("openssl"),
            "needs nghttp2-server and openssl"
        ),
        .timeLimit(.minutes(2))
    )
    func clientVerifiesServerCertificates() async throws {
        let directory = try TemporaryDirectory()
        let certificate = try OpenSSLServerCertificate.make(in: directory)
        let other = try TemporaryDirectory()
        let unrelatedCA = try OpenSSLServerCertificate.make(in: other)
        try FileManager.default.createDirectory(
            at: directory.url.appendingPathComponent("docs"),
            withIntermediateDirectories: true
        )
        let port = ExternalTools.freeTCPPort()
        let server = try ChildProcess(
            "nghttpd",
            ["-d", directory.path("docs"), "\(port)", certificate.keyPath, certificate.certificatePath]
        )
        defer { server.terminate() }
        try await ExternalTools.waitForListener(port: port)

        let signer = try ProviderTokenSigner(privateKey: .init(), keyID: "KEY1234567", teamID: "TEAM123456")
        var configuration = APNsClient.Configuration(
            endpoint: .init(host: "localhost", port: port),
            authentication: .token(ProviderTokenManager(signer: signer)),
            trustRoots: .caFile(unrelatedCA.caPath)
        )
        configuration.requestTimeout = .seconds(3)
        configuration.reconnectBaseDelay = .milliseconds(50)
        let content = try NotificationContent(
            topic: Topic("com.example.app"),
            pushType: .alert,
            priority: .immediate,
            payload: .alert("x")
        )
        let outcome = try await APNsClient.withClient(configuration: configuration) { client in
            await client.send(PreparedNotification(content), to: try DeviceToken(hex: Self.token))
        }
        #expect(outcome.status == nil)
        guard case .connectFailed(let why)? = outcome.transportFailure else {
            Issue.record("expected connect_failed, got \(outcome)")
            return
        }
        #expect(why.contains("TLS") || why.lowercased().contains("certificate"), "\(why)")
    }
}
