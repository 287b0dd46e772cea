import Crypto
import Foundation
import PushgateConfig
import PushgateGateway
import PushgatePostgres
import Testing

@testable import pushgate

/// The flags `main` used to apply beside `Gateway.Configuration` (`--store`, `--store-password-file`,
/// `--chunk-size`, `--lease`) now reach the gateway through `GatewayConfiguration` and the one builder the
/// tests call too.
@Suite("GatewayCommand: flags reach the gateway through the one builder")
struct GatewayCommandCompositionTests {
    private static func built(_ arguments: [String], in folder: URL) async throws -> Gateway.Configuration {
        let keyFile = folder.appendingPathComponent("AuthKey.p8").path
        try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyFile))
        let command = try GatewayCommand.parse(
            ["-d", folder.appendingPathComponent("gateway.db").path, "--auth-key", keyFile]
                + ["--key-id", "KEY1234567", "--team-id", "TEAM123456", "--topic", "com.example.pushgate"]
                + arguments
        )
        let configuration = try await command.gatewayConfiguration(environment: [:])
        return try Gateway.Configuration(configuration, environment: [:])
    }

    private static func withFolder(_ body: (URL) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-compose-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try await body(folder)
    }

    @Test("--store, --store-password-file, --chunk-size and --lease reach the dispatcher and the store")
    func storeFlags() async throws {
        try await Self.withFolder { folder in
            let passwordFile = folder.appendingPathComponent("password").path
            try Data("secret\n".utf8).write(to: URL(fileURLWithPath: passwordFile))
            let built = try await Self.built(
                [
                    "--store", "postgres://pushgate@127.0.0.1:5432/db", "--store-password-file", passwordFile,
                    "--chunk-size", "500", "--lease", "40",
                ],
                in: folder
            )
            guard case .postgres(let postgres) = built.store else {
                Issue.record("--store did not select PostgreSQL")
                return
            }
            #expect(postgres.password == "secret")
            #expect(built.dispatcher.chunkSize == 500)
            #expect(built.dispatcher.leaseDuration == .seconds(40))
            #expect(built.udp.receiveBufferBytes == 64 << 20)
        }
    }

    @Test("without the flags, the store's own chunk size and lease")
    func storeDefaults() async throws {
        try await Self.withFolder { folder in
            let built = try await Self.built(["--store", "postgres://pushgate@127.0.0.1:5432/db"], in: folder)
            #expect(built.dispatcher.chunkSize == PostgresStore.defaultChunkSize)
            #expect(built.dispatcher.leaseDuration == PostgresStore.defaultLeaseDuration)
        }
    }

    @Test("--store-password-file without --store is named by its flag")
    func passwordFileNeedsStore() async throws {
        try await Self.withFolder { folder in
            await #expect(throws: ConfigurationProblem(key: "--store-password-file", "needs --store (or store.url)")) {
                _ = try await Self.built(["--store-password-file", "/dev/null"], in: folder)
            }
        }
    }
}
